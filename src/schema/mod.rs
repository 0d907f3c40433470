//! # JSON Schema → regex (skeleton; see issue 3)

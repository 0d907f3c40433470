//! # Language models (skeleton; see issue 5)

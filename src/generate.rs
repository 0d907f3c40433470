//! # Constrained generation loop (skeleton; see issue 5)

//! # Sampling pipeline (skeleton; see issue 4)

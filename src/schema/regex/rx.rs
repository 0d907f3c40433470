//! # Regex text as a shared tree
//!
//! The generator writes a schema's language bottom-up: a value's text goes
//! inside its property's, the property's inside its object's, and so on up
//! to the document. Written as `String`s, every level copied everything
//! below it, and a definition used at many places was copied at each
//! (most of the schema phase of the largest schemas was `memmove`). An
//! [`Rx`] is that text as a tree of pieces: joining pieces ([`rx!`],
//! [`Rx::cat`]) copies nothing, a shared sub-language is one node however
//! often it is used, and the text is written out once, by [`Rx::text`],
//! where a consumer needs it.
//!
//! The pieces are regex text: an `Rx`'s text is exactly the concatenation
//! of its pieces' texts, so the generator's output is the same, byte for
//! byte, whichever way it was joined.

use std::fmt;
use std::rc::Rc;

/// Regex text, as a tree of shared pieces (see the module's text).
#[derive(Clone)]
pub(crate) enum Rx {
    /// A piece of static text.
    Static(&'static str),
    /// A piece of text made at run time.
    Text(Rc<str>),
    /// Pieces one after the other, with their total length.
    Cat(Rc<Cat>),
}

pub(crate) struct Cat {
    len: usize,
    /// The length with the one-copy constructs written out
    /// ([`crate::dfa::ordered`]).
    plain: usize,
    parts: Box<[Rx]>,
}

impl Drop for Cat {
    /// Iteratively: dropping a deep tree by recursion could overflow the stack.
    fn drop(&mut self) {
        let mut stack: Vec<Rx> = std::mem::take(&mut self.parts).into_vec();
        while let Some(x) = stack.pop() {
            if let Rx::Cat(c) = x {
                if let Ok(mut c) = Rc::try_unwrap(c) {
                    stack.extend(std::mem::take(&mut c.parts).into_vec());
                }
            }
        }
    }
}

impl Rx {
    /// The empty text.
    pub(crate) const EMPTY: Rx = Rx::Static("");

    /// The length of the text in bytes (without writing it out).
    pub(crate) fn len(&self) -> usize {
        match self {
            Rx::Static(s) => s.len(),
            Rx::Text(s) => s.len(),
            Rx::Cat(c) => c.len,
        }
    }

    /// The length of the text with its one-copy constructs written out
    /// ([`crate::dfa::ordered::expanded_len`], without reading the text):
    /// a piece holds no construct; a construct knows its own.
    pub(crate) fn plain_len(&self) -> usize {
        match self {
            Rx::Cat(c) => c.plain,
            _ => self.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `parts` one after the other; empty parts are dropped, and a single
    /// remaining part is returned as it is.
    pub(crate) fn cat(parts: impl IntoIterator<Item = Rx>) -> Rx {
        let parts: Vec<Rx> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        match parts.len() {
            0 => Rx::EMPTY,
            1 => parts.into_iter().next().expect("one part"),
            _ => {
                let plain = parts
                    .iter()
                    .fold(0usize, |n, p| n.saturating_add(p.plain_len()));
                Rx::construct(parts, plain)
            }
        }
    }

    /// `parts` one after the other, whose length with the one-copy
    /// constructs written out is `plain` (for a construct, its own).
    pub(crate) fn construct(parts: Vec<Rx>, plain: usize) -> Rx {
        Rx::Cat(Rc::new(Cat {
            len: parts.iter().map(Rx::len).sum(),
            plain,
            parts: parts.into_boxed_slice(),
        }))
    }

    /// `parts` with `sep` between each two.
    pub(crate) fn join(parts: impl IntoIterator<Item = Rx>, sep: &Rx) -> Rx {
        let mut out = Vec::new();
        for (i, p) in parts.into_iter().enumerate() {
            if i > 0 {
                out.push(sep.clone());
            }
            out.push(p);
        }
        Rx::cat(out)
    }

    /// Owned text as a piece.
    pub(crate) fn owned(s: &str) -> Rx {
        if s.is_empty() {
            Rx::EMPTY
        } else {
            Rx::Text(Rc::from(s))
        }
    }

    /// Appends the text to `out` (iteratively: a tree may be deep).
    fn write_into(&self, out: &mut String) {
        let mut stack: Vec<&Rx> = vec![self];
        while let Some(x) = stack.pop() {
            match x {
                Rx::Static(s) => out.push_str(s),
                Rx::Text(s) => out.push_str(s),
                Rx::Cat(c) => stack.extend(c.parts.iter().rev()),
            }
        }
    }

    /// The text, written out.
    pub(crate) fn text(&self) -> String {
        let mut out = String::with_capacity(self.len());
        self.write_into(&mut out);
        out
    }
}

impl From<&'static str> for Rx {
    fn from(s: &'static str) -> Rx {
        Rx::Static(s)
    }
}

impl From<String> for Rx {
    fn from(s: String) -> Rx {
        if s.is_empty() {
            Rx::EMPTY
        } else {
            Rx::Text(Rc::from(s))
        }
    }
}

impl From<&String> for Rx {
    fn from(s: &String) -> Rx {
        Rx::owned(s)
    }
}

impl From<&Rx> for Rx {
    fn from(s: &Rx) -> Rx {
        s.clone()
    }
}

impl fmt::Debug for Rx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text(), f)
    }
}

/// Pieces of regex text one after the other, as an [`Rx`]: each argument
/// is a `&'static str`, a `String`, a `&String`, an `Rx` or a `&Rx`.
macro_rules! rx {
    ($($p:expr),* $(,)?) => {
        $crate::schema::regex::rx::Rx::cat([$($crate::schema::regex::rx::Rx::from($p)),*])
    };
}
pub(crate) use rx;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_pieces_in_order() {
        let a = rx!["(?:", "a", "|", String::from("b"), ")"];
        assert_eq!(a.text(), "(?:a|b)");
        assert_eq!(a.len(), 7);
        let shared = rx!["x", &a, "y", &a];
        assert_eq!(shared.text(), "x(?:a|b)y(?:a|b)");
        assert_eq!(shared.len(), 16);
        assert_eq!(
            Rx::join([a.clone(), Rx::from("c")], &Rx::from("|")).text(),
            "(?:a|b)|c"
        );
        assert!(rx!["", String::new()].is_empty());
        assert!(matches!(rx!["", "z", ""], Rx::Static("z")));
        // A deep tree is written out without deep recursion.
        let mut deep = Rx::from("0");
        for _ in 0..100_000 {
            deep = rx!["(", deep, ")"];
        }
        assert_eq!(deep.len(), 200_001);
        assert_eq!(deep.text().len(), 200_001);
    }
}

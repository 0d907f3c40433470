//! # The subset parser's patterns compiled to a Thompson NFA without [`Hir`]
//!
//! A big schema's regex is megabytes of text; turned into regex-syntax's
//! [`Hir`](regex_syntax::hir::Hir) (a heap node per literal, class and
//! group, with properties computed at each), compiled by regex-automata,
//! then dropped node by node, the three passes were over half of such a
//! schema's time to first mask. Here the [subset parser](super::parse)
//! builds a compact tree in a few flat vectors instead, and the tree is
//! compiled straight into an [`Nfa`] (flat vectors too), the way
//! regex-automata's compiler does: literals as byte-range chains, classes as
//! one sparse state over their UTF-8 sequences (suffixes shared),
//! alternations and repetitions as unions. A counted repetition compiles its
//! piece once and copies its states for the other copies, and so does a
//! group whose text repeats an earlier group's (a schema's regex writes the
//! "any JSON value" of every free-form property, and each `$ref`'d
//! definition at each use, in full): the parser reads it once
//! ([`Sink::share_groups`]) and its states are copied for every later use.
//! The NFA's language is the pattern's (tested
//! against regex-syntax's NFA on MaskBench patterns and by property tests);
//! greediness is not kept, since the determinizer keeps every thread.
//!
//! Patterns outside the subset return `None` (the caller compiles them with
//! regex-syntax).

use super::nfa::{Nfa, TooBig};
use super::parse::{parse_into, Sink};
use regex_syntax::hir::ClassUnicode;

mod emit;

/// The NFA of `pattern` (anchored; no captures), `None` outside the subset.
/// `ordered`: the schema compiler's `(?&SEP|K1|...|Kn)` and `(?*SEP|ITEM)` are in the subset
/// ([`super::ordered`]).
pub(super) fn parse_nfa(
    pattern: &str,
    size_limit: Option<usize>,
    ordered: bool,
) -> Option<Result<Nfa, TooBig>> {
    parse_nfa_with(pattern, size_limit, ordered, false, ordered)
}

/// A pattern's NFA in the subset with the ordered constructs (tests).
#[cfg(test)]
pub(super) fn nfa_of(pattern: &str) -> Nfa {
    parse_nfa(pattern, None, true)
        .expect("in the direct parser's subset")
        .expect("small")
}

/// [`parse_nfa`]; with `raw_bytes`, a group of byte escapes
/// `(?-u:\xHH...)` (the pushdown engine's call markers, bytes no UTF-8
/// text holds) is in the subset too: those bytes, read as they are. With
/// `sets`, a member set `(?%...)` is compiled with its registers
/// ([`crate::dfa::regs`]); without, its members keep their order (the
/// pushdown engine's fragments, whose distances are searched per NFA state).
pub(super) fn parse_nfa_with(
    pattern: &str,
    size_limit: Option<usize>,
    ordered: bool,
    raw_bytes: bool,
    sets: bool,
) -> Option<Result<Nfa, TooBig>> {
    // Room for the tree up front (address space: pages are touched only as
    // they fill), so a megabyte pattern's vectors are not copied as they grow.
    let n = pattern.len();
    let mut tree = Tree {
        nodes: Vec::with_capacity(n / 2 + 16),
        bytes: Vec::with_capacity(n + 16),
        ranges: Vec::with_capacity(n / 4 + 16),
        kids: Vec::with_capacity(n / 2 + 16),
        ordered,
        raw_bytes,
        sets,
        set_flags: Vec::new(),
        shared: Default::default(),
    };
    let root = parse_into(pattern, &mut tree)?;
    Some(tree.compile(root, size_limit, n))
}

/// A node of [`Tree`]: children, bytes and ranges are spans of its vectors.
#[derive(Clone, Copy)]
enum Node {
    Empty,
    Literal {
        at: u32,
        len: u32,
    },
    Class {
        at: u32,
        len: u32,
    },
    Concat {
        at: u32,
        len: u32,
    },
    Alternation {
        at: u32,
        len: u32,
    },
    Repeat {
        min: u32,
        max: u32,
        sub: u32,
    },
    /// `(?&SEP|K1|...|Kn)`: `kids[at]` is the separator, the `len` items
    /// follow it.
    Ordered {
        at: u32,
        len: u32,
    },
    /// `(?*SEP|ITEM)`: `kids[at]` is the separator, `kids[at + 1]` the item.
    List {
        at: u32,
    },
    /// `(?%FLAGS|SEP|K1|...|Kn)`: `kids[at]` is the separator, the `len`
    /// items follow it; `Tree::set_flags[flags]` says which are required and
    /// whether the last is the extra member.
    Members {
        at: u32,
        len: u32,
        flags: u32,
    },
}

/// [`Node::Repeat`]'s `max` when unbounded.
const UNBOUNDED: u32 = u32::MAX;

/// The parsed pattern: nodes, and the spans they point into.
#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
    bytes: Vec<u8>,
    ranges: Vec<(char, char)>,
    kids: Vec<u32>,
    /// Whether the one-copy constructs `(?&...)` and `(?*...)` are read
    /// ([`parse_nfa`]).
    ordered: bool,
    /// Whether `(?-u:\xHH...)` is read ([`parse_nfa_with`]).
    raw_bytes: bool,
    /// Whether member sets get registers ([`parse_nfa_with`]).
    sets: bool,
    /// Per [`Node::Members`], its required flags and whether it has an
    /// extra member.
    set_flags: Vec<(Vec<bool>, bool)>,
    /// The nodes that stand for more than one group of the pattern (its
    /// groups of equal text share a node, [`Sink::share_groups`]): each is
    /// compiled once and its states copied for its other uses.
    /// (Per node, up to the last one shared.)
    shared: Vec<bool>,
}

impl Tree {
    fn add(&mut self, n: Node) -> u32 {
        self.nodes.push(n);
        (self.nodes.len() - 1) as u32
    }

    fn span(&mut self, items: Vec<u32>) -> (u32, u32) {
        let at = self.kids.len() as u32;
        self.kids.extend_from_slice(&items);
        (at, items.len() as u32)
    }
}

impl Sink for Tree {
    type Node = u32;

    fn literal(&mut self, bytes: Box<[u8]>) -> u32 {
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(&bytes);
        self.add(Node::Literal {
            at,
            len: bytes.len() as u32,
        })
    }

    fn class(&mut self, cls: ClassUnicode) -> u32 {
        let at = self.ranges.len() as u32;
        self.ranges
            .extend(cls.ranges().iter().map(|r| (r.start(), r.end())));
        let len = self.ranges.len() as u32 - at;
        self.add(Node::Class { at, len })
    }

    fn concat(&mut self, items: Vec<u32>) -> u32 {
        let (at, len) = self.span(items);
        self.add(Node::Concat { at, len })
    }

    fn alternation(&mut self, branches: Vec<u32>) -> u32 {
        let (at, len) = self.span(branches);
        self.add(Node::Alternation { at, len })
    }

    fn repetition(&mut self, min: u32, max: Option<u32>, _greedy: bool, sub: u32) -> u32 {
        self.add(Node::Repeat {
            min,
            max: max.unwrap_or(UNBOUNDED),
            sub,
        })
    }

    fn empty(&mut self) -> u32 {
        self.add(Node::Empty)
    }

    fn is_empty(&self, n: &u32) -> bool {
        matches!(self.nodes[*n as usize], Node::Empty)
    }

    fn raw_bytes(&mut self, bytes: Box<[u8]>) -> Option<u32> {
        self.raw_bytes.then(|| self.literal(bytes))
    }

    fn share_groups(&self) -> bool {
        true
    }

    fn reused(&mut self, n: &u32) {
        let n = *n as usize;
        if self.shared.len() <= n {
            self.shared.resize(n + 1, false);
        }
        self.shared[n] = true;
    }

    fn list(&mut self, sep: u32, item: u32) -> Option<u32> {
        if !self.ordered {
            return None;
        }
        let at = self.kids.len() as u32;
        self.kids.push(sep);
        self.kids.push(item);
        Some(self.add(Node::List { at }))
    }

    fn member_set(
        &mut self,
        flags: crate::dfa::ordered::SetFlags,
        sep: u32,
        items: Vec<u32>,
    ) -> Option<u32> {
        if !self.ordered {
            return None;
        }
        let crate::dfa::ordered::SetFlags { required, extra } = flags;
        if self.sets && required.len() <= crate::dfa::sets::MAX_MEMBERS {
            let (at, len) = self.span([vec![sep], items].concat());
            self.set_flags.push((required, extra));
            return Some(self.add(Node::Members {
                at,
                len: len - 1,
                flags: (self.set_flags.len() - 1) as u32,
            }));
        }
        // In order, as `ordered::expand` writes it out.
        let k = required.len();
        let declared = &items[..k];
        let mut parts = Vec::new();
        match required.iter().position(|&r| r) {
            Some(r) => {
                for &d in &declared[..r] {
                    let c = self.concat(vec![d, sep]);
                    parts.push(self.repetition(0, Some(1), true, c));
                }
                parts.push(declared[r]);
                for (&d, &req) in declared.iter().zip(&required).skip(r + 1) {
                    let c = self.concat(vec![sep, d]);
                    parts.push(if req {
                        c
                    } else {
                        self.repetition(0, Some(1), true, c)
                    });
                }
            }
            None => {
                let a = match declared {
                    [one] => *one,
                    _ => self.ordered(sep, declared.to_vec())?,
                };
                parts.push(if extra {
                    self.alternation(vec![a, items[k]])
                } else {
                    a
                });
            }
        }
        if extra {
            let c = self.concat(vec![sep, items[k]]);
            parts.push(self.repetition(0, None, true, c));
        }
        Some(self.concat(parts))
    }

    fn ordered(&mut self, sep: u32, items: Vec<u32>) -> Option<u32> {
        if !self.ordered {
            return None;
        }
        let at = self.kids.len() as u32;
        self.kids.push(sep);
        self.kids.extend_from_slice(&items);
        Some(self.add(Node::Ordered {
            at,
            len: items.len() as u32,
        }))
    }
}

#[cfg(test)]
mod tests;

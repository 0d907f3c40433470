//! # The subset parser's patterns compiled to a Thompson NFA without [`Hir`]
//!
//! A big schema's regex is megabytes of text; turned into regex-syntax's
//! [`Hir`](regex_syntax::hir::Hir) (a heap node per literal, class and
//! group, with properties computed at each), compiled by regex-automata,
//! then dropped node by node, the three passes were over half of such a
//! schema's time to first mask. Here the [subset parser](super::parse)
//! builds a compact tree in a few flat vectors instead, and the tree is
//! compiled straight into regex-automata's NFA [`Builder`], the way its own
//! compiler does: literals as byte-range chains, classes as one sparse state
//! over their UTF-8 sequences (suffixes shared), alternations and
//! repetitions as unions. The NFA's language is the pattern's (tested
//! against regex-syntax's NFA on MaskBench patterns and by property tests);
//! greediness is not kept, since the determinizer keeps every thread.
//!
//! Patterns outside the subset return `None` (the caller compiles them with
//! regex-syntax).

use super::parse::{parse_into, Sink};
use regex_automata::nfa::thompson::{BuildError, Builder, Transition, NFA};
use regex_automata::util::primitives::StateID;
use regex_syntax::hir::ClassUnicode;
use regex_syntax::utf8::Utf8Sequences;
use std::collections::HashMap;

/// The NFA of `pattern` (anchored; no captures), `None` outside the subset.
pub(super) fn parse_nfa(
    pattern: &str,
    size_limit: Option<usize>,
) -> Option<Result<NFA, BuildError>> {
    // Room for the tree up front (address space: pages are touched only as
    // they fill), so a megabyte pattern's vectors are not copied as they grow.
    let n = pattern.len();
    let mut tree = Tree {
        nodes: Vec::with_capacity(n / 2 + 16),
        bytes: Vec::with_capacity(n + 16),
        ranges: Vec::with_capacity(n / 4 + 16),
        kids: Vec::with_capacity(n / 2 + 16),
    };
    let root = parse_into(pattern, &mut tree)?;
    Some(tree.compile(root, size_limit))
}

/// A node of [`Tree`]: children, bytes and ranges are spans of its vectors.
#[derive(Clone, Copy)]
enum Node {
    Empty,
    Literal { at: u32, len: u32 },
    Class { at: u32, len: u32 },
    Concat { at: u32, len: u32 },
    Alternation { at: u32, len: u32 },
    Repeat { min: u32, max: u32, sub: u32 },
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
}

/// A compiled piece: its start state and the state whose (unset) exit is
/// patched to what follows.
#[derive(Clone, Copy)]
struct Piece {
    start: StateID,
    end: StateID,
}

/// Compiles a [`Tree`] into a [`Builder`].
struct Emitter<'t> {
    tree: &'t Tree,
    b: Builder,
    /// Per class emission, the byte-range states by (range, next): UTF-8
    /// sequences of one class share their suffixes.
    suffixes: HashMap<(u8, u8, StateID), StateID>,
}

impl Tree {
    fn compile(&self, root: u32, size_limit: Option<usize>) -> Result<NFA, BuildError> {
        let mut e = Emitter {
            tree: self,
            b: Builder::new(),
            suffixes: HashMap::new(),
        };
        e.b.set_utf8(true);
        e.b.set_size_limit(size_limit)?;
        e.b.start_pattern()?;
        let p = e.emit(root)?;
        let m = e.b.add_match()?;
        e.b.patch(p.end, m)?;
        e.b.finish_pattern(p.start)?;
        e.b.build(p.start, p.start)
    }
}

impl Emitter<'_> {
    fn emit(&mut self, n: u32) -> Result<Piece, BuildError> {
        match self.tree.nodes[n as usize] {
            Node::Empty => self.empty(),
            Node::Literal { at, len } => {
                let bytes = &self.tree.bytes[at as usize..(at + len) as usize];
                let mut piece: Option<Piece> = None;
                for &byte in bytes {
                    let s = self.b.add_range(Transition {
                        start: byte,
                        end: byte,
                        next: StateID::ZERO,
                    })?;
                    piece = Some(self.join(piece, Piece { start: s, end: s })?);
                }
                piece.map_or_else(|| self.empty(), Ok)
            }
            Node::Class { at, len } => self.class(at as usize, len as usize),
            Node::Concat { at, len } => {
                let mut piece: Option<Piece> = None;
                for i in at..at + len {
                    let q = self.emit(self.tree.kids[i as usize])?;
                    piece = Some(self.join(piece, q)?);
                }
                piece.map_or_else(|| self.empty(), Ok)
            }
            Node::Alternation { at, len } => {
                let kids = &self.tree.kids[at as usize..(at + len) as usize];
                if kids
                    .iter()
                    .all(|&k| matches!(self.tree.nodes[k as usize], Node::Literal { .. }))
                {
                    return self.literal_trie(at as usize, len as usize);
                }
                let u = self.b.add_union(Vec::new())?;
                let end = self.b.add_empty()?;
                for i in at..at + len {
                    let q = self.emit(self.tree.kids[i as usize])?;
                    self.b.patch(u, q.start)?;
                    self.b.patch(q.end, end)?;
                }
                Ok(Piece { start: u, end })
            }
            Node::Repeat { min, max, sub } => self.repeat(min, max, sub),
        }
    }

    /// An alternation of literals as a trie (shared prefixes, as
    /// regex-automata's compiler does): property names share their quote
    /// and often more.
    fn literal_trie(&mut self, at: usize, len: usize) -> Result<Piece, BuildError> {
        // Trie nodes: sorted (byte, child) edges, and whether a literal ends there.
        let mut edges: Vec<Vec<(u8, usize)>> = vec![Vec::new()];
        let mut ends = vec![false];
        for &k in &self.tree.kids[at..at + len] {
            let Node::Literal { at, len } = self.tree.nodes[k as usize] else {
                unreachable!("only literals");
            };
            let mut node = 0;
            for &byte in &self.tree.bytes[at as usize..(at + len) as usize] {
                node = match edges[node].binary_search_by_key(&byte, |e| e.0) {
                    Ok(i) => edges[node][i].1,
                    Err(i) => {
                        edges.push(Vec::new());
                        ends.push(false);
                        let child = edges.len() - 1;
                        edges[node].insert(i, (byte, child));
                        child
                    }
                };
            }
            ends[node] = true;
        }
        let exit = self.b.add_empty()?;
        // Children have higher numbers than their parents: build from the last.
        let mut state = vec![StateID::ZERO; edges.len()];
        for node in (0..edges.len()).rev() {
            state[node] = if edges[node].is_empty() {
                exit
            } else {
                let trans = edges[node]
                    .iter()
                    .map(|&(byte, child)| Transition {
                        start: byte,
                        end: byte,
                        next: state[child],
                    })
                    .collect();
                let s = self.b.add_sparse(trans)?;
                if ends[node] {
                    self.b.add_union(vec![s, exit])?
                } else {
                    s
                }
            };
        }
        Ok(Piece {
            start: state[0],
            end: exit,
        })
    }

    fn empty(&mut self) -> Result<Piece, BuildError> {
        let s = self.b.add_empty()?;
        Ok(Piece { start: s, end: s })
    }

    /// `min` copies of `sub`, then `max - min` optional ones (each may skip
    /// to the end) or, unbounded, a loop whose union is the piece's end (no
    /// empty states: a big pattern repeats thousands of times).
    fn repeat(&mut self, min: u32, max: u32, sub: u32) -> Result<Piece, BuildError> {
        let mut acc: Option<Piece> = None;
        let required = if max == UNBOUNDED {
            min.max(1) - 1
        } else {
            min
        };
        for _ in 0..required {
            let q = self.emit(sub)?;
            acc = Some(self.join(acc, q)?);
        }
        if max == UNBOUNDED {
            // `sub*`, or the last of `min` copies looping back (`sub+`).
            let u = self.b.add_union(Vec::new())?;
            let q = self.emit(sub)?;
            self.b.patch(u, q.start)?;
            self.b.patch(q.end, u)?;
            let start = if min == 0 { u } else { q.start };
            return self.join(acc, Piece { start, end: u });
        }
        if max == min {
            return acc.map_or_else(|| self.empty(), Ok);
        }
        let exit = self.b.add_empty()?;
        for _ in min..max {
            let u = self.b.add_union(Vec::new())?;
            self.b.patch(u, exit)?;
            let q = self.emit(sub)?;
            self.b.patch(u, q.start)?;
            acc = Some(self.join(
                acc,
                Piece {
                    start: u,
                    end: q.end,
                },
            )?);
        }
        let p = acc.expect("max > min");
        self.b.patch(p.end, exit)?;
        Ok(Piece {
            start: p.start,
            end: exit,
        })
    }

    /// `acc` (if any) followed by `q`.
    fn join(&mut self, acc: Option<Piece>, q: Piece) -> Result<Piece, BuildError> {
        Ok(match acc {
            None => q,
            Some(p) => {
                self.b.patch(p.end, q.start)?;
                Piece {
                    start: p.start,
                    end: q.end,
                }
            }
        })
    }

    /// One sparse state over the class's first bytes; the rest of each UTF-8
    /// sequence is a chain of byte ranges into one exit, suffixes shared.
    fn class(&mut self, at: usize, len: usize) -> Result<Piece, BuildError> {
        let exit = self.b.add_empty()?;
        self.suffixes.clear();
        let mut first: Vec<Transition> = Vec::new();
        for &(lo, hi) in &self.tree.ranges[at..at + len] {
            for seq in Utf8Sequences::new(lo, hi) {
                let ranges = seq.as_slice();
                let mut next = exit;
                for r in ranges[1..].iter().rev() {
                    let key = (r.start, r.end, next);
                    next = match self.suffixes.get(&key) {
                        Some(&s) => s,
                        None => {
                            let s = self.b.add_range(Transition {
                                start: r.start,
                                end: r.end,
                                next,
                            })?;
                            self.suffixes.insert(key, s);
                            s
                        }
                    };
                }
                first.push(Transition {
                    start: ranges[0].start,
                    end: ranges[0].end,
                    next,
                });
            }
        }
        first.sort_by_key(|t| (t.start, t.end));
        let start = self.b.add_sparse(first)?;
        Ok(Piece { start, end: exit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::{first_difference, ByteDfa, DfaConfig};
    use proptest::prelude::*;

    /// The eager DFA of `nfa` (our determinizer) against regex-syntax's.
    fn same_language(p: &str) {
        let Some(nfa) = parse_nfa(p, None) else {
            return;
        };
        let nfa = nfa.expect("no size limit");
        let config = DfaConfig {
            lazy_states: None,
            ..DfaConfig::default()
        };
        let ours = match ByteDfa::determinize(nfa, p.len(), usize::MAX, &config) {
            Ok(crate::dfa::Dfa::Eager(d)) => d,
            _ => panic!("{p:?}: not determinized eagerly"),
        };
        let reference = ByteDfa::new_reference(p, &config).expect("reference DFA");
        assert_eq!(
            first_difference(&ours, &reference),
            None,
            "pattern {p:?}: a text in one language only"
        );
    }

    #[test]
    fn schema_syntax_compiles_to_the_same_language() {
        let patterns = crate::dfa::parse::tests::SCHEMA_PATTERNS
            .iter()
            .filter(|p| !p.contains("\\u{"));
        let more = [
            r"\{[ \t\n\r]{0,2}(?:\x{1F600}|é)?",
            "(?:ab|a|abc|b|ba)x",
            "(?:\"name\"|\"nickname\"|é|ü)",
            "(?:a*)*b",
            "(?:a?){3,5}",
            "(?:|a){2,}",
            "x{0}y{0,0}z",
            r"[^a]{2}",
        ];
        for &p in patterns.chain(more.iter()) {
            assert!(parse_nfa(p, None).is_some(), "{p:?} is in the subset");
            same_language(p);
        }
    }

    #[test]
    fn outside_the_subset_is_none() {
        for p in ["(a)", ".", r"\d", "[a"] {
            assert!(parse_nfa(p, None).is_none(), "{p:?}");
        }
    }

    #[test]
    fn the_size_limit_is_an_error() {
        let p = "(?:abcdefgh){1000}";
        assert!(matches!(parse_nfa(p, Some(1000)), Some(Err(_))));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]
        #[test]
        fn random_texts_compile_to_the_same_language(
            p in r#"[-a-c()|?*+{}\[\]^\\,0-9:x"é\x00 ]{0,20}"#
        ) {
            same_language(&p);
        }

        #[test]
        fn well_formed_patterns_compile_to_the_same_language(
            p in crate::dfa::parse::tests::pattern()
        ) {
            prop_assert!(parse_nfa(&p, None).is_some(), "{:?}", p);
            same_language(&p);
        }
    }
}

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

use super::nfa::{Builder, Edge, Kind, Nfa, TooBig, HOLE};
use super::parse::{parse_into, Sink};
use regex_syntax::hir::ClassUnicode;
use regex_syntax::utf8::Utf8Sequences;
use std::collections::HashMap;

/// The NFA of `pattern` (anchored; no captures), `None` outside the subset.
/// `ordered`: the schema compiler's `(?&SEP|K1|...|Kn)` and `(?*SEP|ITEM)` are in the subset
/// ([`super::ordered`]).
pub(super) fn parse_nfa(
    pattern: &str,
    size_limit: Option<usize>,
    ordered: bool,
) -> Option<Result<Nfa, TooBig>> {
    parse_nfa_with(pattern, size_limit, ordered, false)
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
/// text holds) is in the subset too: those bytes, read as they are.
pub(super) fn parse_nfa_with(
    pattern: &str,
    size_limit: Option<usize>,
    ordered: bool,
    raw_bytes: bool,
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

/// A compiled piece: its start state and its end state, whose last edge is
/// the exit ([`HOLE`]) patched to what follows.
#[derive(Clone, Copy)]
struct Piece {
    start: u32,
    end: u32,
}

/// Compiles a [`Tree`] into a [`Builder`].
struct Emitter<'t> {
    tree: &'t Tree,
    b: Builder,
    /// Per tree node, the fewest bytes of a text it matches (`u32::MAX`:
    /// none).
    minlen: Vec<u32>,
    /// Per class emission, the byte-range states by (range, next): UTF-8
    /// sequences of one class share their suffixes.
    suffixes: HashMap<(u8, u8, u32), u32, foldhash::fast::RandomState>,
    /// Per shared node ([`Tree::shared`]) compiled so far, its last
    /// compilation, which its next use copies ([`Copies`]).
    copies: HashMap<u32, Copies, foldhash::fast::RandomState>,
}

/// `a + b` where `u32::MAX` is "never" (unreachable stays unreachable).
fn plus(a: u32, b: u32) -> u32 {
    a.saturating_add(b)
}

impl Tree {
    fn compile(&self, root: u32, size_limit: Option<usize>, len: usize) -> Result<Nfa, TooBig> {
        let mut e = Emitter {
            tree: self,
            b: Builder::with_distances(size_limit.unwrap_or(usize::MAX), len),
            minlen: self.minlen(),
            suffixes: HashMap::default(),
            copies: HashMap::default(),
        };
        let p = e.emit(root, 0)?;
        let m = e.b.add(Kind::Match, &[], 0)?;
        e.b.patch(p.end, m);
        Ok(e.b.finish(p.start))
    }

    /// [`Emitter::minlen`] of every node (children come before their
    /// parents).
    fn minlen(&self) -> Vec<u32> {
        let mut m: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let kids = |at: u32, len: u32| self.kids[at as usize..(at + len) as usize].iter();
            let v = match *n {
                Node::Empty => 0,
                Node::Literal { len, .. } => len,
                Node::Class { at, len } => match len {
                    0 => u32::MAX,
                    _ => self.ranges[at as usize].0.len_utf8() as u32,
                },
                Node::Concat { at, len } => kids(at, len).fold(0, |a, &k| plus(a, m[k as usize])),
                Node::Alternation { at, len } => kids(at, len)
                    .map(|&k| m[k as usize])
                    .min()
                    .unwrap_or(u32::MAX),
                Node::Repeat { min, sub, .. } => match min {
                    0 => 0,
                    _ => m[sub as usize].saturating_mul(min),
                },
                Node::Ordered { at, len } => kids(at + 1, len)
                    .map(|&k| m[k as usize])
                    .min()
                    .unwrap_or(u32::MAX),
                Node::List { at } => m[self.kids[at as usize + 1] as usize],
            };
            m.push(v);
        }
        m
    }
}

impl Emitter<'_> {
    /// Compiles node `n`, whose exit is `tail` bytes from the match state at
    /// the fewest (so every state's distance is known when it is added: a
    /// piece is left only through its exit).
    fn emit(&mut self, n: u32, tail: u32) -> Result<Piece, TooBig> {
        if self.tree.shared.get(n as usize) == Some(&true) {
            let mut c = self.copies.remove(&n).unwrap_or(Copies {
                sub: n,
                last: None,
                fresh: false,
            });
            let q = c.next_with(self, tail, Self::emit_node);
            self.copies.insert(n, c);
            return q;
        }
        self.emit_node(n, tail)
    }

    /// [`Emitter::emit`], compiling `n` itself.
    fn emit_node(&mut self, n: u32, tail: u32) -> Result<Piece, TooBig> {
        match self.tree.nodes[n as usize] {
            Node::Empty => self.empty(tail),
            Node::Literal { at, len } => {
                // Built from the last byte back: each state knows its next.
                let bytes = &self.tree.bytes[at as usize..(at + len) as usize];
                let Some((&last, init)) = bytes.split_last() else {
                    return self.empty(tail);
                };
                let end = self.b.add_range(last, last, HOLE, plus(tail, 1))?;
                let mut start = end;
                for (i, &byte) in init.iter().enumerate().rev() {
                    let d = plus(tail, (bytes.len() - i) as u32);
                    start = self.b.add_range(byte, byte, start, d)?;
                }
                Ok(Piece { start, end })
            }
            Node::Class { at, len } => self.class(at as usize, len as usize, tail),
            Node::Concat { at, len } => {
                // Each item's exit is the rest of the concatenation away.
                let kids = &self.tree.kids[at as usize..(at + len) as usize];
                let mut rest = kids
                    .iter()
                    .fold(tail, |a, &k| plus(a, self.minlen[k as usize]));
                let mut piece: Option<Piece> = None;
                for &k in kids {
                    rest = if rest == u32::MAX {
                        // (Some later item matches nothing: so does all.)
                        rest
                    } else {
                        rest - self.minlen[k as usize]
                    };
                    let q = self.emit(k, rest)?;
                    piece = Some(self.join(piece, q));
                }
                piece.map_or_else(|| self.empty(tail), Ok)
            }
            Node::Alternation { at, len } => {
                let kids = &self.tree.kids[at as usize..(at + len) as usize];
                if kids
                    .iter()
                    .all(|&k| matches!(self.tree.nodes[k as usize], Node::Literal { .. }))
                {
                    return self.literal_trie(at as usize, len as usize, tail);
                }
                let mut pieces = Vec::with_capacity(len as usize);
                for i in at..at + len {
                    pieces.push(self.emit(self.tree.kids[i as usize], tail)?);
                }
                let end = self.b.add_empty(tail)?;
                let mut starts = Vec::with_capacity(pieces.len());
                let mut d = u32::MAX;
                for q in pieces {
                    self.b.patch(q.end, end);
                    starts.push(Edge::eps(q.start));
                    d = d.min(self.b.dist(q.start));
                }
                let start = self.b.add(Kind::Eps, &starts, d)?;
                Ok(Piece { start, end })
            }
            Node::Repeat { min, max, sub } => self.repeat(min, max, sub, tail),
            Node::Ordered { at, len } => self.ordered(at as usize, len as usize, tail),
            Node::List { at } => self.list(at as usize, tail),
        }
    }

    /// `(?&SEP|K1|...|Kn)` with one copy of each item, built from the last
    /// item back. Before item `i`, a state `enter_i` that enters any item
    /// from `i` on (`K_i`, or skip to `enter_{i+1}`): the start is
    /// `enter_0`. After item `i`, a state that leaves (the exit) or reads a
    /// separator and goes to `enter_{i+1}`: one separator thread per item
    /// written, so a state inside item `i` (whose closure reaches the end of
    /// the item) holds one separator's threads, not one per item left (a
    /// separator copy before each later item, entered by a chain of skips,
    /// made every state of a value of a 100-member object carry a hundred
    /// separators' threads). The separator's exit is `enter_{i+1}`'s
    /// distance further; every state after an item is `tail` bytes from the
    /// match, and `enter_i` still has to write its shortest item.
    fn ordered(&mut self, at: usize, len: usize, tail: u32) -> Result<Piece, TooBig> {
        let sep = self.tree.kids[at];
        let items = &self.tree.kids[at + 1..at + 1 + len];
        let exit = self.b.add_empty(tail)?;
        // `enter_{i+1}` and its distance (none after the last item).
        let mut enter: Option<(u32, u32)> = None;
        for i in (0..len).rev() {
            let k = items[i];
            let after = match enter {
                None => exit,
                Some((e, d)) => {
                    let s = self.emit(sep, d)?;
                    self.b.patch(s.end, e);
                    self.b
                        .add(Kind::Eps, &[Edge::eps(s.start), Edge::eps(exit)], tail)?
                }
            };
            let q = self.emit(k, tail)?;
            self.b.patch(q.end, after);
            let d = plus(tail, self.minlen[k as usize]);
            enter = Some(match enter {
                None => (q.start, d),
                Some((e, de)) => {
                    let d = d.min(de);
                    let s = self
                        .b
                        .add(Kind::Eps, &[Edge::eps(q.start), Edge::eps(e)], d)?;
                    (s, d)
                }
            });
        }
        Ok(Piece {
            start: enter.expect("at least one item").0,
            end: exit,
        })
    }

    /// `(?*SEP|ITEM)`: one copy of the item and of the separator. After
    /// the item, a state that leaves (the exit) or reads the separator and
    /// goes back to the item's start; both are `tail` bytes from the match
    /// (the separator's exit is the item's shortest text further).
    fn list(&mut self, at: usize, tail: u32) -> Result<Piece, TooBig> {
        let (sep, item) = (self.tree.kids[at], self.tree.kids[at + 1]);
        let exit = self.b.add_empty(tail)?;
        let q = self.emit(item, tail)?;
        let s = self.emit(sep, plus(tail, self.minlen[item as usize]))?;
        self.b.patch(s.end, q.start);
        let after = self
            .b
            .add(Kind::Eps, &[Edge::eps(exit), Edge::eps(s.start)], tail)?;
        self.b.patch(q.end, after);
        Ok(Piece {
            start: q.start,
            end: exit,
        })
    }

    /// An alternation of literals as a trie (shared prefixes, as
    /// regex-automata's compiler does): property names share their quote
    /// and often more.
    fn literal_trie(&mut self, at: usize, len: usize, tail: u32) -> Result<Piece, TooBig> {
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
        let exit = self.b.add_empty(tail)?;
        // Children have higher numbers than their parents: build from the
        // last. `short[node]`: the fewest bytes from it to a literal's end.
        let mut state = vec![0u32; edges.len()];
        let mut short = vec![0u32; edges.len()];
        let mut trans = Vec::new();
        for node in (0..edges.len()).rev() {
            let reads = edges[node]
                .iter()
                .map(|&(_, child)| short[child] + 1)
                .min()
                .unwrap_or(0);
            short[node] = if ends[node] { 0 } else { reads };
            state[node] = if edges[node].is_empty() {
                exit
            } else {
                trans.clear();
                trans.extend(edges[node].iter().map(|&(byte, child)| Edge {
                    lo: byte,
                    hi: byte,
                    next: state[child],
                }));
                let s = self.b.add(Kind::Bytes, &trans, plus(tail, reads))?;
                if ends[node] {
                    self.b
                        .add(Kind::Eps, &[Edge::eps(s), Edge::eps(exit)], tail)?
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

    fn empty(&mut self, tail: u32) -> Result<Piece, TooBig> {
        let s = self.b.add_empty(tail)?;
        Ok(Piece { start: s, end: s })
    }

    /// `min` copies of `sub`, then `max - min` optional ones (each may skip
    /// to the end) or, unbounded, a loop whose union is the piece's end (no
    /// empty states: a big pattern repeats thousands of times). `sub` is
    /// compiled once; every further copy copies the states of the one
    /// before ([`Builder::copy`]).
    fn repeat(&mut self, min: u32, max: u32, sub: u32, tail: u32) -> Result<Piece, TooBig> {
        let mut copies = Copies {
            sub,
            last: None,
            fresh: false,
        };
        let mut acc: Option<Piece> = None;
        let ml = self.minlen[sub as usize];
        let (required, after) = if max == UNBOUNDED {
            // The loop's own copy is required too when `min > 0`.
            (min.max(1) - 1, if min > 0 { ml } else { 0 })
        } else {
            (min, 0)
        };
        // The required copies, then the optional ones: each a run of
        // units ([`Units`]).
        let mut units = Units::default();
        for i in 0..required {
            // Copies still required after this one, then the rest.
            let rest = plus(ml.saturating_mul(required - 1 - i), after);
            let q = copies.next(self, plus(tail, rest))?;
            units.add(&copies, 0);
            acc = Some(self.join(acc, q));
        }
        units.record(&mut self.b, ml);
        if max == UNBOUNDED {
            // `sub*`, or the last of `min` copies looping back (`sub+`).
            let q = copies.next(self, tail)?;
            let u = self
                .b
                .add(Kind::Eps, &[Edge::eps(q.start), Edge::eps(HOLE)], tail)?;
            self.b.patch(q.end, u);
            let start = if min == 0 { u } else { q.start };
            return Ok(self.join(acc, Piece { start, end: u }));
        }
        if max == min {
            return acc.map_or_else(|| self.empty(tail), Ok);
        }
        let exit = self.b.add_empty(tail)?;
        for _ in min..max {
            let q = copies.next(self, tail)?;
            let u = self
                .b
                .add(Kind::Eps, &[Edge::eps(exit), Edge::eps(q.start)], tail)?;
            // A unit: the copy and the state before it that may leave.
            units.add(&copies, (u == self.b.len() - 1) as u32);
            acc = Some(self.join(
                acc,
                Piece {
                    start: u,
                    end: q.end,
                },
            ));
        }
        units.record(&mut self.b, ml);
        let p = acc.expect("max > min");
        self.b.patch(p.end, exit);
        Ok(Piece {
            start: p.start,
            end: exit,
        })
    }

    /// `acc` (if any) followed by `q`.
    fn join(&mut self, acc: Option<Piece>, q: Piece) -> Piece {
        match acc {
            None => q,
            Some(p) => {
                self.b.patch(p.end, q.start);
                Piece {
                    start: p.start,
                    end: q.end,
                }
            }
        }
    }

    /// One sparse state over the class's first bytes; the rest of each UTF-8
    /// sequence is a chain of byte ranges into one exit, suffixes shared.
    fn class(&mut self, at: usize, len: usize, tail: u32) -> Result<Piece, TooBig> {
        let exit = self.b.add_empty(tail)?;
        self.suffixes.clear();
        let mut first: Vec<Edge> = Vec::new();
        let mut shortest = u32::MAX;
        for &(lo, hi) in &self.tree.ranges[at..at + len] {
            for seq in Utf8Sequences::new(lo, hi) {
                let ranges = seq.as_slice();
                shortest = shortest.min(ranges.len() as u32);
                let mut next = exit;
                for (i, r) in ranges.iter().enumerate().skip(1).rev() {
                    let key = (r.start, r.end, next);
                    next = match self.suffixes.get(&key) {
                        Some(&s) => s,
                        None => {
                            let d = plus(tail, (ranges.len() - i) as u32);
                            let s = self.b.add_range(r.start, r.end, next, d)?;
                            self.suffixes.insert(key, s);
                            s
                        }
                    };
                }
                first.push(Edge {
                    lo: ranges[0].start,
                    hi: ranges[0].end,
                    next,
                });
            }
        }
        first.sort_by_key(|t| (t.lo, t.hi));
        let start = self.b.add(Kind::Bytes, &first, plus(tail, shortest))?;
        Ok(Piece { start, end: exit })
    }
}

/// The units of a run of copies being laid out (see
/// [`CopyRun`](super::nfa::CopyRun)): each the states of one copy plus
/// `extra` states added right after it.
#[derive(Default)]
struct Units {
    start: u32,
    stride: u32,
    count: u32,
    /// The layout broke the pattern (a copy compiled afresh, or not right
    /// after the unit before).
    broken: bool,
}

impl Units {
    /// Adds the copy `copies` just made, with `extra` states after it.
    fn add(&mut self, copies: &Copies, extra: u32) {
        let Some((states, ..)) = &copies.last else {
            self.broken = true;
            return;
        };
        let stride = states.end - states.start + extra;
        if self.count == 0 {
            (self.start, self.stride) = (states.start, stride);
        } else if copies.fresh
            || stride != self.stride
            || states.start != self.start + self.count * self.stride
        {
            self.broken = true;
        }
        self.count += 1;
    }

    /// Records the run (when whole) with the builder, and starts anew.
    fn record(&mut self, b: &mut Builder, minlen: u32) {
        if !self.broken && self.count > 0 && minlen != u32::MAX {
            b.record_run(self.start, self.stride, self.count, minlen);
        }
        *self = Units::default();
    }
}

/// The copies of one repeated piece: the first compiled, each later one a
/// copy of the states of the one before (compiled pieces only lead within
/// their own states, or out through their exit), its distances shifted by
/// the difference of the two exits' distances.
struct Copies {
    sub: u32,
    /// The last copy's states, piece and exit distance.
    last: Option<(std::ops::Range<u32>, Piece, u32)>,
    /// Whether the last copy was compiled afresh (not copied from the one
    /// before).
    fresh: bool,
}

impl Copies {
    fn next(&mut self, e: &mut Emitter<'_>, tail: u32) -> Result<Piece, TooBig> {
        self.next_with(e, tail, Emitter::emit)
    }

    /// [`Copies::next`], compiling the first copy with `emit`.
    fn next_with<'t>(
        &mut self,
        e: &mut Emitter<'t>,
        tail: u32,
        emit: fn(&mut Emitter<'t>, u32, u32) -> Result<Piece, TooBig>,
    ) -> Result<Piece, TooBig> {
        self.fresh = false;
        let (states, q) = match self.last.take() {
            // (A copy's distances are its original's moved: not from or to
            // "unreachable", which has no distance to move.)
            Some((states, q, was)) if was != u32::MAX && tail != u32::MAX => {
                let d = e.b.copy(states.clone(), q.end, tail as i64 - was as i64)?;
                (
                    states.start + d..states.end + d,
                    Piece {
                        start: q.start + d,
                        end: q.end + d,
                    },
                )
            }
            _ => {
                self.fresh = true;
                let s0 = e.b.len();
                let q = emit(e, self.sub, tail)?;
                (s0..e.b.len(), q)
            }
        };
        self.last = Some((states, q, tail));
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::parse::SHARED_GROUP_MIN;
    use crate::dfa::{first_difference, ByteDfa, DfaConfig};
    use proptest::prelude::*;

    /// The eager DFA of `nfa` (our determinizer) against regex-syntax's.
    fn same_language(p: &str) {
        same_language_as(p, false);
    }

    /// With `ordered`, `p` may hold `(?&SEP|K1|...|Kn)`: the reference is
    /// regex-syntax's DFA of the text written out.
    fn same_language_as(p: &str, ordered: bool) {
        let Some(nfa) = parse_nfa(p, None, ordered) else {
            return;
        };
        let mut nfa = nfa.expect("no size limit");
        let mut given = nfa
            .take_distances()
            .expect("the direct compiler keeps distances");
        let mut searched = crate::dfa::determinize::nfa_distances(&nfa);
        // Compared where the start reaches: a state only an empty class
        // leads to (`[^\x00-\x{10FFFF}]x`) is compiled as if it could not
        // reach the match, and nothing reads it.
        let mut seen = vec![false; nfa.len()];
        let mut stack = vec![nfa.start()];
        while let Some(q) = stack.pop() {
            if !std::mem::replace(&mut seen[q as usize], true) {
                stack.extend(nfa.edges(q).iter().map(|e| e.next));
            }
        }
        for (q, reached) in seen.iter().enumerate() {
            if !reached {
                (given[q], searched[q]) = (0, 0);
            }
        }
        assert_eq!(
            given, searched,
            "pattern {p:?}: distances kept while compiling differ from a search's"
        );
        // Bounded: a random pattern's DFA can be exponential (counted
        // repetitions nested and repeated), and regex-automata's
        // determinizer then ran for minutes before its default limit. Such
        // a pattern is not compared (both sides hit the same kind of limit;
        // any other error still fails).
        let config = DfaConfig {
            lazy_states: None,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 128 << 20,
            ..DfaConfig::default()
        };
        let too_big = |e: &crate::dfa::DfaError| matches!(e, crate::dfa::DfaError::TooBig { .. });
        let ours = match ByteDfa::determinize(nfa, p.len(), usize::MAX, &config) {
            Ok(crate::dfa::Dfa::Eager(d)) => d,
            Err(e) if too_big(&e) => return,
            _ => panic!("{p:?}: not determinized eagerly"),
        };
        let plain = crate::dfa::ordered::expand(p, usize::MAX).expect("no limit");
        let reference = match ByteDfa::new_reference(&plain, &config) {
            Ok(r) => r,
            Err(e) if too_big(&e) => return,
            Err(e) => panic!("{p:?}: reference DFA: {e}"),
        };
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
            assert!(
                parse_nfa(p, None, false).is_some(),
                "{p:?} is in the subset"
            );
            same_language(p);
        }
    }

    #[test]
    fn ordered_members_compile_to_the_written_out_language() {
        for p in [
            "(?&,|a|b)",
            "(?&,|a|bc|d)",
            r#"\{(?:(?&[ ]?,[ ]?|"a":1|"b":(?&;|x|y*|z)|"c":\[\]))?\}"#,
            "(?&,|a?|b|c*)",
            "(?:(?&,|a|b)x){2,3}",
            "(?:(?&,|a|b)|c)+",
            "(?&(?:,|;)|(?:a|ab)|b{2}|(?&-|c|d))",
            "(?*,|a)",
            "(?*,|(?:ab|c))",
            r"\[(?:(?*[ ]?,[ ]?|(?&,|x|y)))?\]",
            "(?*(?:,|;)|a*)",
            "(?*|b?)",
            "(?:(?*,|a)b){2,3}",
            "(?*,|(?*;|x))",
        ] {
            assert!(parse_nfa(p, None, true).is_some(), "{p:?} is in the subset");
            same_language_as(p, true);
        }
        // Only where allowed; and it needs a separator and an item.
        assert!(parse_nfa("(?&,|a|b)", None, false).is_none());
        assert!(parse_nfa("(?&,)", None, true).is_none());
        assert!(parse_nfa("(?*,|a)", None, false).is_none());
        assert!(parse_nfa("(?*,|a|b)", None, true).is_none());
        assert!(parse_nfa("(?*a)", None, true).is_none());
        // regex-syntax has no such syntax.
        assert!(ByteDfa::new_reference("(?&,|a|b)", &DfaConfig::default()).is_err());
    }

    #[test]
    fn a_state_inside_an_ordered_member_holds_one_separator() {
        // After the first member's value (a digit loop that may end there),
        // the state's NFA threads must not grow with the members left: one
        // separator after the member written, however many may follow.
        let key_after = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!("k{i}:[0-9]+")).collect();
            let p = format!("(?&[ ]*,[ ]*|{})", members.join("|"));
            let nfa = parse_nfa(&p, None, true)
                .expect("in the subset")
                .expect("small");
            let mut det = super::super::determinize::Determinizer::new(nfa, usize::MAX, usize::MAX);
            let mut s = det.start;
            for &b in b"k0:12" {
                det.explore(s as usize).expect("no limit");
                s = det.trans[s as usize * det.stride + det.classes[b as usize] as usize];
                assert_ne!(s, 0, "k0:12 is live");
            }
            det.key(s).len()
        };
        let (few, many) = (key_after(3), key_after(60));
        assert_eq!(
            few, many,
            "threads after the first member: {few} with 3 members, {many} with 60"
        );
        same_language_as("(?&[ ]*,[ ]*|k0:[0-9]+|k1:[0-9]+|k2:[0-9]+|k3:x)", true);
    }

    #[test]
    fn raw_byte_groups_compile_to_regex_syntax_bytes() {
        // The pushdown engine's call markers: bytes no UTF-8 text holds.
        let config = DfaConfig {
            lazy_states: None,
            ..DfaConfig::default()
        };
        for p in [
            r"a(?-u:\xF8\x00\x01)b",
            r"\[(?:(?-u:\xF8\x00\x02)(?:,(?-u:\xF8\x00\x02))*)?\]",
            r"(?&,|x|(?-u:\xF5)|y(?-u:\xF6))",
            r"(?:(?-u:\xF5)|(?-u:\xF6)){1,3}z",
        ] {
            let nfa = parse_nfa_with(p, None, true, true)
                .unwrap_or_else(|| panic!("{p:?} is in the subset"))
                .expect("no size limit");
            let ours = ByteDfa::from_nfa_whole(nfa, p.len(), &config).expect("DFA");
            let plain = crate::dfa::ordered::expand(p, usize::MAX).expect("no limit");
            let hir = regex_syntax::ParserBuilder::new()
                .utf8(false)
                .build()
                .parse(&plain)
                .expect("regex-syntax reads it");
            let reference = ByteDfa::from_hir(&hir, p.len(), &config).expect("reference DFA");
            assert_eq!(
                first_difference(&ours, &reference),
                None,
                "pattern {p:?}: a text in one language only"
            );
        }
        // Only where allowed, and only whole byte escapes.
        assert!(parse_nfa(r"(?-u:\xF5)", None, true).is_none());
        for p in [
            r"(?-u:\xF)",
            r"(?-u:)",
            r"(?-u:a)",
            r"(?-u:\xF5",
            r"(?-u:\x{F5})",
        ] {
            assert!(parse_nfa_with(p, None, true, true).is_none(), "{p:?}");
        }
    }

    #[test]
    fn outside_the_subset_is_none() {
        for p in ["(a)", ".", r"\d", "[a"] {
            assert!(parse_nfa(p, None, false).is_none(), "{p:?}");
        }
    }

    #[test]
    fn the_size_limit_is_an_error() {
        let p = "(?:abcdefgh){1000}";
        assert!(matches!(parse_nfa(p, Some(1000), false), Some(Err(_))));
    }

    /// Whether compiling `p` reuses a group's node for a later group of the
    /// same text.
    fn shares_groups(p: &str) -> bool {
        let mut tree = Tree {
            ordered: true,
            ..Tree::default()
        };
        parse_into(p, &mut tree).expect("in the subset");
        tree.shared.contains(&true)
    }

    #[test]
    fn groups_of_equal_text_compile_once_to_the_same_language() {
        // 50 bytes and more, so shared.
        let g = r#"(?:"(?:[^"\\\x00-\x1F]|\\["\\bfnrt])*"|-?(?:0|[1-9][0-9]{0,3})|null)"#;
        assert!(g.len() >= SHARED_GROUP_MIN, "{g}");
        let dead = r"[^\x00-\x{10FFFF}]";
        for p in [
            format!("{g}{g}"),
            format!("{g},{g}x|{g}"),
            format!("(?:{g}|ab){{2,4}}{g}"),
            format!("\\[(?:{g}(?:,{g})*)?\\]"),
            format!("(?:(?:(?:{g})))x{g}"),
            format!("(?:{g}{dead}|y){g}"),
            format!("{g}{dead}|{g}z"),
            format!("(?&,|a{g}|b{g}|{g})"),
            format!("(?*,|{g})z{g}"),
        ] {
            assert!(shares_groups(&p), "{p}");
            same_language_as(&p, true);
        }
        // Shorter groups are read each time.
        assert!(!shares_groups("(?:ab|cd)(?:ab|cd)"));
        // Shared at any depth, up to where the nesting limit would refuse
        // the group read again.
        let nest = |d: usize, x: &str| format!("{}{x}{}", "(?:".repeat(d), ")".repeat(d));
        assert!(shares_groups(&format!("{}{g}", nest(5, g))));
        assert!(shares_groups(&format!("{g}{}", nest(5, g))));
        // g nests 2 levels: at depth 198 it still fits the 200 allowed, as
        // when read again; one deeper, the pattern is refused as it was.
        let max = super::super::parse::MAX_DEPTH as usize;
        assert!(shares_groups(&format!("{g}{}", nest(max - 2, g))));
        assert!(parse_nfa(&format!("{g}{}", nest(max - 1, g)), None, true).is_none());
        assert!(parse_nfa(&nest(max - 1, g), None, true).is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn repeated_long_groups_compile_to_the_same_language(
            g in crate::dfa::parse::tests::pattern(),
            h in crate::dfa::parse::tests::pattern(),
            shape in 0..5usize,
        ) {
            // Padded to the shared length, so every use after the first is
            // a copy.
            let g = format!("(?:{g}|{})", "q".repeat(SHARED_GROUP_MIN));
            let p = match shape {
                0 => format!("{g}{h}{g}"),
                1 => format!("(?:{g}|{h}){{1,3}}{g}"),
                2 => format!("(?:{h}{g})*{g}?"),
                3 => format!("{g}|x{g}y|{h}"),
                _ => format!("(?&,|{g}|{h}{g})"),
            };
            prop_assert!(shares_groups(&p), "{:?}", p);
            same_language_as(&p, true);
        }
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
        fn ordered_members_of_random_patterns_compile_to_the_same_language(
            items in prop::collection::vec("[a-c]{1,3}|[a-c][?*]|(?:a|bc)[+?]|[ab][0-9]", 1..5),
            sep in "(,|;|[ ]?,)",
            nest in any::<bool>(),
        ) {
            let mut items: Vec<String> = items.iter().map(|p| format!("(?:{p})")).collect();
            if nest && items.len() > 1 {
                let inner: Vec<&str> = items[..2].iter().map(String::as_str).collect();
                let inner = crate::dfa::ordered::write(":", &inner);
                items[0] = format!("x{inner}");
            }
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            let p = crate::dfa::ordered::write(&sep, &refs);
            prop_assert!(parse_nfa(&p, None, true).is_some(), "{:?}", p);
            same_language_as(&p, true);
        }

        #[test]
        fn lists_of_random_patterns_compile_to_the_same_language(
            item in "[a-c]{1,3}|[a-c][?*]|(?:a|bc)[+?]|[ab][0-9]",
            sep in "(,|;|[ ]?,|)",
            inner in any::<bool>(),
            optional in any::<bool>(),
        ) {
            let mut item = format!("(?:{item})");
            if inner {
                // A list inside the item, and members around it.
                let nested = crate::dfa::ordered::write_list(":", &item);
                item = crate::dfa::ordered::write(";", &["x", &format!("\\[{nested}\\]"), "y"]);
            }
            let list = crate::dfa::ordered::write_list(&sep, &item);
            let p = if optional { format!("(?:{list})?z") } else { list };
            prop_assert!(parse_nfa(&p, None, true).is_some(), "{:?}", p);
            same_language_as(&p, true);
        }

        #[test]
        fn well_formed_patterns_compile_to_the_same_language(
            p in crate::dfa::parse::tests::pattern()
        ) {
            prop_assert!(parse_nfa(&p, None, false).is_some(), "{:?}", p);
            same_language(&p);
        }
    }
}

//! # The direct compiler's emitter: a parsed [`Tree`] to a Thompson NFA
//!
//! [`Emitter`] walks the tree built by the subset parser and adds states to
//! a [`Builder`]: literals as byte-range chains, classes as one sparse state
//! over their UTF-8 sequences (suffixes shared), repetitions and shared
//! groups as copies of the first compiled piece ([`Copies`]), runs of equal
//! copies recorded for the determinizer's shift-back ([`Units`]). Every
//! state's distance to the match state is known when it is added.

use super::{Node, Tree, UNBOUNDED};
use crate::dfa::nfa::{Builder, Edge, Kind, Nfa, TooBig, HOLE};
use regex_syntax::utf8::Utf8Sequences;
use std::collections::HashMap;

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
    pub(super) fn compile(
        &self,
        root: u32,
        size_limit: Option<usize>,
        len: usize,
    ) -> Result<Nfa, TooBig> {
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
                Node::Members { at, len, flags } => {
                    // The required members with separators between, or the
                    // shortest single member.
                    let sep = m[self.kids[at as usize] as usize];
                    let (required, _) = &self.set_flags[flags as usize];
                    let items = kids(at + 1, len).map(|&k| m[k as usize]);
                    let req: Vec<u32> = items
                        .clone()
                        .zip(required)
                        .filter(|&(_, &r)| r)
                        .map(|(v, _)| v)
                        .collect();
                    if req.is_empty() {
                        items.min().unwrap_or(u32::MAX)
                    } else {
                        let between = sep.saturating_mul(req.len() as u32 - 1);
                        req.into_iter().fold(between, plus)
                    }
                }
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
            Node::Members { at, len, flags } => {
                self.members(at as usize, len as usize, flags as usize, tail)
            }
        }
    }

    /// `(?%FLAGS|SEP|K1|...|Kn)` with one copy of each member and a
    /// register per open set ([`crate::dfa::regs`]): `ENTER`, `FIRST`
    /// entering any member, each member's operation (entered first, or
    /// after its own separator copy), `NEXT` after a member, `LEAVE`. Every
    /// state inside is given `tail` and its member's own bytes as distance
    /// (the determinizer searches the exact ones).
    fn members(&mut self, at: usize, len: usize, flags: usize, tail: u32) -> Result<Piece, TooBig> {
        use crate::dfa::sets::{MemberSet, RegOp, EXTRA};
        let sep = self.tree.kids[at];
        let items: Vec<u32> = self.tree.kids[at + 1..at + 1 + len].to_vec();
        let (required, extra) = self.tree.set_flags[flags].clone();
        let mut bodies = Vec::with_capacity(len);
        let mut seps = Vec::with_capacity(len);
        for &k in &items {
            let q = self.emit(k, tail)?;
            let s = self.emit(sep, plus(tail, self.minlen[k as usize]))?;
            self.b.patch(s.end, q.start);
            bodies.push(q);
            seps.push(s);
        }
        // Inner sets took their ids while the members were compiled.
        let id = self.b.set_count();
        let leave = self.b.add_op(RegOp::Leave(id), HOLE, tail)?;
        let index = |i: usize| if i < required.len() { i as u8 } else { EXTRA };
        let mut first = Vec::with_capacity(len);
        let mut again = Vec::with_capacity(len);
        for (i, (q, s)) in bodies.iter().zip(&seps).enumerate() {
            let d = plus(tail, self.minlen[items[i] as usize]);
            first.push(self.b.add_op(RegOp::Member(id, index(i)), q.start, d)?);
            again.push(self.b.add_op(RegOp::Member(id, index(i)), s.start, d)?);
        }
        let mut next_edges = vec![Edge::eps(leave)];
        next_edges.extend(again.iter().map(|&q| Edge::eps(q)));
        let next = self.b.add(Kind::Eps, &next_edges, tail)?;
        for q in &bodies {
            self.b.patch(q.end, next);
        }
        let first_edges: Vec<Edge> = first.iter().map(|&q| Edge::eps(q)).collect();
        let d = plus(tail, self.minlen[items[0] as usize]);
        let start = self.b.add(Kind::Eps, &first_edges, d)?;
        let enter = self.b.add_op(RegOp::Enter(id), start, d)?;
        let mut bits = 0u64;
        for (i, &r) in required.iter().enumerate() {
            if r {
                bits |= 1 << i;
            }
        }
        self.b.add_set(MemberSet {
            members: required.len() as u8,
            required: bits,
            extra,
            lo: 1,
            hi: u32::MAX,
            leave_back: enter - leave,
            next_back: enter - next,
            first_back: first.iter().map(|&q| enter - q).collect(),
            again_back: again.iter().map(|&q| enter - q).collect(),
        });
        Ok(Piece {
            start: enter,
            end: leave,
        })
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

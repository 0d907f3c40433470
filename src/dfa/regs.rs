//! # Member sets: an object's properties in any order, each at most once
//!
//! JSON Schema does not order an object's properties. A regex that accepts
//! every order writes every permutation (n! paths, each value copied
//! about e·(n−1)! times), so the schema compiler used to keep the schema's
//! order past three properties. A *member set* is the construct
//! `(?%FLAGS|SEP|K1|...|Kn)` ([`super::ordered`]): one or more members
//! joined by `SEP`, each declared member `Ki` at most once and every
//! required one present (`FLAGS` holds `R` or `O` per declared member, and
//! `X` when the last item is the extra member, a key none of the declared
//! names, which may repeat).
//!
//! The NFA keeps one copy of each member and a *register* per open set:
//! the members written so far (a bit each) and their count. A thread is an
//! NFA state with a stack of such frames (sets nest: an object inside a
//! member's value). Four [`Kind::Op`](super::nfa::Kind::Op) states carry the
//! operations:
//!
//! ```text
//! ENTER ─▶ FIRST ─▶ Member(i) ─▶ Ki ─▶ NEXT ─▶ LEAVE ─▶ (what follows)
//!                                  ▲      │
//!                                  └ SEP ◀┴─ Member(j)
//! ```
//!
//! `ENTER` pushes an empty frame; `Member(i)` stops the thread when `i` was
//! written already, and sets its bit; `LEAVE` stops it unless every
//! required member was written, and pops the frame. The determinizer
//! interns each (state, stack) pair as a thread id past the NFA's states,
//! so a DFA state is a set of threads as before, and only the sets of
//! written members that a text reaches are ever made: the lazy DFA visits
//! one per member written, not 2ⁿ.
//!
//! Distances stay exact. [`distances`] gives every state its fewest bytes
//! to the match when each open set may close right after the member being
//! written (the *base* distance: a fresh set inside counts its cheapest
//! complete member list, all required members included); a thread adds,
//! per frame, what its set still needs ([`SetCost::rest`]: the required
//! members not written, each with a separator).

use super::nfa::{Edge, Kind, Nfa};
use super::op_reach::Reversed;
use std::collections::{BinaryHeap, HashMap};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

pub use super::sets::{MemberSet, RegOp, EXTRA};

/// A set's costs, from the NFA's distances: per item, its fewest bytes;
/// the separator's; and the cheapest complete member list.
#[derive(Clone, Debug, Default)]
pub(super) struct SetCost {
    cost: Vec<u32>,
    sep: u32,
    rest0: u32,
}

/// `a + b` where `u32::MAX` is "never".
fn plus(a: u32, b: u32) -> u32 {
    if a == u32::MAX || b == u32::MAX {
        u32::MAX
    } else {
        a.saturating_add(b).min(u32::MAX - 1)
    }
}

impl SetCost {
    /// Fewest bytes still to write in a set whose written members are
    /// `bits` (`count` in all), from the point right after a member (or,
    /// with `count` 0, from its start): the required members missing and
    /// enough others to reach the least count, each after a separator but
    /// the very first. `u32::MAX` when the set cannot be completed.
    fn rest(&self, set: &MemberSet, bits: u64, count: u32) -> u32 {
        let missing = set.required & !bits;
        let m = missing.count_ones();
        let mut total = 0u32;
        let mut b = missing;
        while b != 0 {
            let i = b.trailing_zeros() as usize;
            b &= b - 1;
            total = plus(total, self.cost[i]);
        }
        let least = set.lo.max(u32::from(count == 0));
        let fill = least.saturating_sub(count + m);
        if total == u32::MAX || count as u64 + m as u64 + fill as u64 > set.hi as u64 {
            return u32::MAX;
        }
        if fill > 0 {
            let extra = if set.extra {
                self.cost[set.members as usize]
            } else {
                u32::MAX
            };
            let mut optional: Vec<u32> = (0..set.members as usize)
                .filter(|&i| (bits | set.required) & (1 << i) == 0)
                .map(|i| self.cost[i])
                .filter(|&c| c != u32::MAX)
                .collect();
            optional.sort_unstable();
            let mut opt = optional.into_iter().peekable();
            for _ in 0..fill {
                let c = match opt.peek() {
                    Some(&c) if c <= extra => {
                        opt.next();
                        c
                    }
                    _ => extra,
                };
                total = plus(total, c);
            }
            if total == u32::MAX {
                return u32::MAX;
            }
        }
        let added = m + fill;
        let seps = if count == 0 {
            added.saturating_sub(1)
        } else {
            added
        };
        plus(total, self.sep.saturating_mul(seps))
    }
}

/// Base distances ([module docs](self)) of every NFA state, with `weight`
/// the cost of a byte edge, and each set's costs. A search per `ENTER`
/// state (inner sets first: an inner set's states come before its outer
/// set's `ENTER`) finds the fewest bytes from each state of the set's
/// members to its `NEXT`, never stepping from `LEAVE` back into the
/// members nor from `FIRST` back to `ENTER`; an inner set is crossed in
/// one step from its `LEAVE` to its `ENTER`, at its cheapest complete list.
/// A last search does the same from the match state for the states outside
/// every set, and each state's base distance is its own plus its set's
/// `LEAVE`'s.
pub(super) fn distances(
    nfa: &Nfa,
    weight: &dyn Fn(&Edge) -> u32,
) -> (Vec<u32>, Vec<SetCost>, Reversed) {
    let n = nfa.len();
    let sets = nfa.sets();
    // Per LEAVE state, its ENTER; the ENTER states in order.
    let mut enter_of: FastMap<u32, u32> = FastMap::default();
    let mut enters: Vec<(u32, u32)> = Vec::new();
    for &(q, op) in nfa.ops() {
        if let RegOp::Enter(s) = op {
            enter_of.insert(q - sets[s as usize].leave_back, q);
            enters.push((q, s));
        }
    }
    // Reversed edges (kept for the lazy index's `op_reach`), followed
    // without ENTER's own edge and the edges into LEAVE.
    let (reversed, weights) = Reversed::of(nfa, weight);
    let mut is_enter = vec![false; n];
    for &(e, _) in &enters {
        is_enter[e as usize] = true;
    }
    let is_leave = |q: u32| nfa.kind(q) == Kind::Op && matches!(nfa.op(q), RegOp::Leave(_));
    const TOP: u32 = u32::MAX;
    const NONE: u32 = u32::MAX - 1;
    let mut local = vec![u32::MAX; n];
    let mut owner = vec![NONE; n];
    let mut costs: Vec<Option<SetCost>> = vec![None; sets.len()];
    let mut queue = Queue::default();
    let mut search = |sources: &[u32],
                      me: u32,
                      local: &mut Vec<u32>,
                      owner: &mut Vec<u32>,
                      costs: &Vec<Option<SetCost>>| {
        for &s in sources {
            local[s as usize] = 0;
            owner[s as usize] = me;
            queue.push(0, s);
        }
        while let Some((d, t)) = queue.pop() {
            if d > local[t as usize] {
                continue;
            }
            let mut relax = |src: u32, nd: u32, local: &mut Vec<u32>, owner: &mut Vec<u32>| {
                let o = owner[src as usize];
                if (o == NONE || o == me) && nd < local[src as usize] {
                    local[src as usize] = nd;
                    owner[src as usize] = me;
                    queue.push(nd, src);
                }
            };
            if !is_leave(t) {
                for i in reversed.edges_into(t) {
                    let (src, w) = (reversed.src(i), weights[i]);
                    if w != u32::MAX && !is_enter[src as usize] {
                        relax(src, plus(d, w), local, owner);
                    }
                }
            }
            if nfa.kind(t) != Kind::Op {
                continue;
            }
            if let Some(&e) = enter_of.get(&t) {
                let RegOp::Enter(s) = nfa.op(e) else {
                    unreachable!("an ENTER state")
                };
                if let Some(c) = &costs[s as usize] {
                    relax(e, plus(d, c.rest0), local, owner);
                }
            }
        }
    };
    for (i, &(e, s)) in enters.iter().enumerate() {
        let set = &sets[s as usize];
        search(
            &[e - set.next_back],
            i as u32,
            &mut local,
            &mut owner,
            &costs,
        );
        if costs[s as usize].is_none() {
            let at = |b: u32| local[(e - b) as usize];
            let cost: Vec<u32> = set.first_back.iter().map(|&b| at(b)).collect();
            let sep = set
                .first_back
                .iter()
                .zip(&set.again_back)
                .map(|(&f, &a)| (at(f), at(a)))
                .find(|&(f, a)| f != u32::MAX && a != u32::MAX)
                .map_or(0, |(f, a)| a.saturating_sub(f));
            let mut c = SetCost {
                cost,
                sep,
                rest0: 0,
            };
            c.rest0 = c.rest(set, 0, 0);
            costs[s as usize] = Some(c);
        }
    }
    let matches: Vec<u32> = (0..n as u32).filter(|&q| nfa.is_match(q)).collect();
    search(&matches, TOP, &mut local, &mut owner, &costs);
    // Each set's LEAVE, outer sets first (their ENTER comes later).
    let mut leave_base = vec![u32::MAX; enters.len()];
    for i in (0..enters.len()).rev() {
        let (e, s) = enters[i];
        let leave = (e - sets[s as usize].leave_back) as usize;
        leave_base[i] = match owner[leave] {
            TOP => local[leave],
            NONE => u32::MAX,
            o => plus(local[leave], leave_base[o as usize]),
        };
    }
    let base = (0..n)
        .map(|q| match owner[q] {
            TOP => local[q],
            NONE => u32::MAX,
            o => plus(local[q], leave_base[o as usize]),
        })
        .collect();
    let costs = costs.into_iter().map(Option::unwrap_or_default).collect();
    (base, costs, reversed)
}

/// A priority queue of (distance, state) for [`distances`]: Dial's buckets
/// below [`Queue::NEAR`] (a byte costs 1; a call marker or an inner set
/// more), a heap past them. Distances popped never decrease.
#[derive(Default)]
struct Queue {
    buckets: Vec<Vec<u32>>,
    level: usize,
    heap: BinaryHeap<std::cmp::Reverse<(u32, u32)>>,
}

impl Queue {
    const NEAR: u32 = 1 << 16;

    fn push(&mut self, d: u32, q: u32) {
        if d < Self::NEAR {
            let d = d as usize;
            if self.buckets.len() <= d {
                self.buckets.resize_with(d + 1, Vec::new);
            }
            self.level = self.level.min(d);
            self.buckets[d].push(q);
        } else {
            self.heap.push(std::cmp::Reverse((d, q)));
        }
    }

    fn pop(&mut self) -> Option<(u32, u32)> {
        while self.level < self.buckets.len() {
            if let Some(q) = self.buckets[self.level].pop() {
                return Some((self.level as u32, q));
            }
            self.level += 1;
        }
        let r = self.heap.pop().map(|std::cmp::Reverse(x)| x);
        if r.is_none() {
            // Empty: the next search starts from distance 0.
            self.level = 0;
        }
        r
    }
}

/// One open set of a thread: its written members and their count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Frame {
    set: u32,
    count: u32,
    bits: u64,
}

/// The threads of a determinizer over an NFA with member sets: thread id
/// `q < n` is NFA state `q` with no set open; past `n`, an interned
/// (state, stack) pair.
pub(super) struct Registers {
    n: u32,
    costs: Vec<SetCost>,
    stacks: Vec<Box<[Frame]>>,
    stack_ids: FastMap<Box<[Frame]>, u32>,
    threads: Vec<(u32, u32)>,
    thread_ids: FastMap<(u32, u32), u32>,
    /// Per thread past `n`, its distance ([module docs](self)).
    tdist: Vec<u32>,
    /// Per NFA state, the search that last met it and the stack it met
    /// it with ([`Registers::search`]).
    mark: Vec<(u32, u32)>,
    /// The (state, stack) pairs a search met besides those in `mark` (a
    /// state met again with another stack).
    also: std::collections::HashSet<(u32, u32), foldhash::fast::RandomState>,
    generation: u32,
    todo: Vec<(u32, u32)>,
    /// Per seed thread, its closure (a DFA state's successors on a class
    /// are mostly the closure of one thread that many states reach), up to
    /// [`MEMO_THREADS`] threads in all.
    memo: FastMap<u32, Box<[u32]>>,
    memo_len: usize,
    one: Vec<u32>,
    /// Heap bytes of the stacks.
    stack_bytes: usize,
}

/// Most threads [`Registers`] keeps memoized closures of, in all.
const MEMO_THREADS: usize = 8 << 20;

impl Registers {
    pub(super) fn new(nfa: &Nfa, costs: Vec<SetCost>) -> Registers {
        let mut stack_ids = FastMap::default();
        stack_ids.insert(Box::from([]), 0);
        Registers {
            n: nfa.len() as u32,
            costs,
            stacks: vec![Box::from([])],
            stack_ids,
            threads: Vec::new(),
            thread_ids: FastMap::default(),
            tdist: Vec::new(),
            mark: Vec::new(),
            also: Default::default(),
            generation: 0,
            todo: Vec::new(),
            memo: FastMap::default(),
            memo_len: 0,
            one: Vec::new(),
            stack_bytes: 0,
        }
    }

    /// Heap bytes held (for the determinization limit).
    pub(super) fn bytes(&self) -> usize {
        self.threads.len() * 28 + self.stack_bytes + self.memo_len * 4
    }

    /// Thread `t`'s NFA state.
    #[inline]
    pub(super) fn state(&self, t: u32) -> u32 {
        if t < self.n {
            t
        } else {
            self.threads[(t - self.n) as usize].0
        }
    }

    /// Thread `t`'s stack id.
    #[inline]
    fn stack(&self, t: u32) -> u32 {
        if t < self.n {
            0
        } else {
            self.threads[(t - self.n) as usize].1
        }
    }

    /// Thread `t`'s fewest bytes to the match.
    #[inline]
    pub(super) fn dist(&self, base: &[u32], t: u32) -> u32 {
        if t < self.n {
            base[t as usize]
        } else {
            self.tdist[(t - self.n) as usize]
        }
    }

    /// The thread of NFA state `q` with the stack of thread `of`.
    pub(super) fn moved(&mut self, nfa: &Nfa, base: &[u32], of: u32, q: u32) -> u32 {
        let r = self.stack(of);
        self.thread(nfa, base, q, r)
    }

    fn thread(&mut self, nfa: &Nfa, base: &[u32], q: u32, r: u32) -> u32 {
        if r == 0 {
            return q;
        }
        if let Some(&t) = self.thread_ids.get(&(q, r)) {
            return t;
        }
        let mut d = base[q as usize];
        for f in self.stacks[r as usize].iter() {
            if f.count > 0 {
                let set = &nfa.sets()[f.set as usize];
                d = plus(d, self.costs[f.set as usize].rest(set, f.bits, f.count));
            }
        }
        let t = self.n + self.threads.len() as u32;
        self.threads.push((q, r));
        self.tdist.push(d);
        self.thread_ids.insert((q, r), t);
        t
    }

    fn intern_stack(&mut self, frames: Vec<Frame>) -> u32 {
        if let Some(&r) = self.stack_ids.get(frames.as_slice()) {
            return r;
        }
        let r = self.stacks.len() as u32;
        self.stack_bytes += frames.len() * 32 + 40;
        let b: Box<[Frame]> = frames.into();
        self.stacks.push(b.clone());
        self.stack_ids.insert(b, r);
        r
    }

    /// Stack `r` after `op`, or `None` when the operation stops the thread.
    fn apply(&mut self, nfa: &Nfa, op: RegOp, r: u32) -> Option<u32> {
        let mut frames = self.stacks[r as usize].to_vec();
        match op {
            RegOp::Enter(s) => frames.push(Frame {
                set: s,
                count: 0,
                bits: 0,
            }),
            RegOp::Member(s, i) => {
                let set = &nfa.sets()[s as usize];
                let top = frames.last_mut().filter(|f| f.set == s)?;
                if i != EXTRA {
                    if top.bits & (1 << i) != 0 {
                        return None;
                    }
                    top.bits |= 1 << i;
                }
                if top.count >= set.hi {
                    return None;
                }
                top.count += 1;
                if set.hi == u32::MAX {
                    // Without a most, counts from the least on (and from 1)
                    // fare alike ([`SetCost::rest`], `LEAVE`): one frame for
                    // them all, so extra keys written make no new states.
                    top.count = top.count.min(set.lo.max(1));
                }
            }
            RegOp::Leave(s) => {
                let set = &nfa.sets()[s as usize];
                let top = frames.pop().filter(|f| f.set == s)?;
                if set.required & !top.bits != 0 || top.count < set.lo {
                    return None;
                }
            }
        }
        Some(self.intern_stack(frames))
    }

    /// The sorted threads reached from `seeds` through epsilon and
    /// operation states that can still reach the match: the byte-reading
    /// and match ones. Each seed's own closure is searched once and kept.
    pub(super) fn closure(&mut self, nfa: &Nfa, base: &[u32], seeds: &[u32], out: &mut Vec<u32>) {
        out.clear();
        if self.memo_len >= MEMO_THREADS {
            return self.search(nfa, base, seeds, out);
        }
        for &s in seeds {
            if !self.memo.contains_key(&s) {
                let mut one = std::mem::take(&mut self.one);
                self.search(nfa, base, &[s], &mut one);
                self.memo_len += one.len() + 1;
                self.memo.insert(s, one.as_slice().into());
                self.one = one;
            }
        }
        for s in seeds {
            out.extend_from_slice(&self.memo[s]);
        }
        if seeds.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }

    /// [`Registers::closure`] searched. The search moves (state, stack)
    /// pairs and makes a thread only of the byte-reading and match states
    /// it keeps: the epsilon and operation states it passes (most of a
    /// key's start, one path per member left) are never threads.
    fn search(&mut self, nfa: &Nfa, base: &[u32], seeds: &[u32], out: &mut Vec<u32>) {
        out.clear();
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.mark.iter_mut().for_each(|m| *m = (0, 0));
            self.generation = 1;
        }
        if self.mark.len() < self.n as usize {
            self.mark.resize(self.n as usize, (0, 0));
        }
        self.also.clear();
        let g = self.generation;
        let mut todo = std::mem::take(&mut self.todo);
        todo.extend(seeds.iter().rev().map(|&t| (self.state(t), self.stack(t))));
        while let Some((q, r)) = todo.pop() {
            if base[q as usize] == u32::MAX {
                continue;
            }
            let m = &mut self.mark[q as usize];
            if m.0 != g {
                *m = (g, r);
            } else if m.1 == r || !self.also.insert((q, r)) {
                continue;
            }
            match nfa.kind(q) {
                Kind::Bytes | Kind::Match => {
                    let t = self.thread(nfa, base, q, r);
                    if self.dist(base, t) != u32::MAX {
                        out.push(t);
                    }
                }
                Kind::Eps => todo.extend(nfa.edges(q).iter().rev().map(|e| (e.next, r))),
                Kind::Op => {
                    if let Some(r) = self.apply(nfa, nfa.op(q), r) {
                        todo.push((nfa.edges(q)[0].next, r));
                    }
                }
            }
        }
        self.todo = todo;
        out.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::super::determinize::Determinizer;
    use super::super::direct::nfa_of;
    use super::super::ordered::{expand, write_set, SetFlags};

    /// Whether `text` is a list of `members` (by text) joined by `,`,
    /// declared ones at most once, every required one present, the extra
    /// one (`x`) any number of times.
    fn oracle(text: &str, members: &[&str], required: &[bool], extra: Option<&str>) -> bool {
        if text.is_empty() {
            return false;
        }
        let mut seen = vec![false; members.len()];
        for part in text.split(',') {
            match members.iter().position(|m| *m == part) {
                Some(i) if !seen[i] => seen[i] = true,
                Some(_) => return false,
                None if Some(part) == extra => {}
                None => return false,
            }
        }
        required.iter().zip(&seen).all(|(&r, &s)| !r || s)
    }

    struct Walk(Determinizer);

    impl Walk {
        fn run(&mut self, text: &[u8]) -> u32 {
            let mut s = self.0.start;
            for &b in text {
                if s == 0 {
                    return 0;
                }
                self.0.explore(s as usize).unwrap();
                s = self.0.trans[s as usize * self.0.stride + self.0.classes[b as usize] as usize];
            }
            s
        }
    }

    /// Every text of up to `max` bytes over the members' alphabet.
    fn texts(alphabet: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut all = vec![Vec::new()];
        let mut level = vec![Vec::new()];
        for _ in 0..max {
            let mut next = Vec::new();
            for t in &level {
                for &b in alphabet {
                    let mut u: Vec<u8> = t.clone();
                    u.push(b);
                    next.push(u);
                }
            }
            all.extend(next.iter().cloned());
            level = next;
        }
        all
    }

    fn check(members: &[&str], required: &[bool], extra: Option<&str>, max: usize) {
        let mut items: Vec<&str> = members.to_vec();
        items.extend(extra);
        let flags = SetFlags {
            required: required.to_vec(),
            extra: extra.is_some(),
        };
        let pattern = write_set(",", &flags, &items);
        let mut w = Walk(Determinizer::new(nfa_of(&pattern), usize::MAX, usize::MAX));
        let plain = expand(&pattern, 1 << 20).unwrap();
        let ordered = regex::Regex::new(&format!("^(?:{plain})$")).unwrap();
        let all = texts(b"abcx,", max);
        let accepted: Vec<&Vec<u8>> = all
            .iter()
            .filter(|t| oracle(std::str::from_utf8(t).unwrap(), members, required, extra))
            .collect();
        for t in &all {
            let s = std::str::from_utf8(t).unwrap();
            let want = oracle(s, members, required, extra);
            let st = w.run(t);
            let got = st != 0 && w.0.accepting[st as usize];
            assert_eq!(got, want, "{s:?} in {pattern}");
            // Written out in order: a sub-language.
            if ordered.is_match(s) {
                assert!(want, "{s:?} in the ordered {plain}");
            }
            // Live exactly when some accepted text (of the bound) extends
            // it, and the distance is the shortest such extension.
            let shortest = accepted
                .iter()
                .filter(|a| a.starts_with(t))
                .map(|a| (a.len() - t.len()) as u32)
                .min();
            if t.len() + 3 <= max {
                assert_eq!(st != 0, shortest.is_some(), "live {s:?} in {pattern}");
            }
            if let Some(d) = shortest {
                if t.len() + d as usize <= max && st != 0 {
                    assert_eq!(w.0.dist[st as usize], d, "distance of {s:?} in {pattern}");
                }
            }
        }
    }

    #[test]
    fn members_in_any_order_each_once_required_present() {
        check(&["a", "b", "cc"], &[false, false, false], None, 8);
        check(&["a", "b", "cc"], &[true, false, true], None, 8);
        check(&["a", "bb"], &[false, true], Some("x"), 8);
        check(&["a", "b"], &[true, true], Some("xx"), 9);
    }

    #[test]
    fn nested_sets_keep_their_own_registers() {
        // `{...}` holding a set, inside a set; the inner one requires `a`.
        let flags = |required: &[bool]| SetFlags {
            required: required.to_vec(),
            extra: false,
        };
        let inner = write_set(",", &flags(&[true, false]), &["a", "b"]);
        let outer = write_set(
            ";",
            &flags(&[false, true]),
            &[&format!("c\\{{{inner}\\}}"), "d"],
        );
        let mut w = Walk(Determinizer::new(nfa_of(&outer), usize::MAX, usize::MAX));
        let accept = |w: &mut Walk, t: &str| {
            let s = w.run(t.as_bytes());
            s != 0 && w.0.accepting[s as usize]
        };
        for ok in ["d", "d;c{a}", "c{b,a};d", "c{a,b};d"] {
            assert!(accept(&mut w, ok), "{ok}");
        }
        for bad in ["c{a}", "d;d", "c{b};d", "c{a,a};d", "d;c{a};c{a}", ""] {
            assert!(!accept(&mut w, bad), "{bad}");
        }
        // `c{b,` needs `a}` and `;d`: 4 bytes.
        let s = w.run(b"c{b,");
        assert_eq!(w.0.dist[s as usize], 4);
        // At the start: `d`.
        assert_eq!(w.0.dist[w.0.start as usize], 1);
    }
}

//! The run-time half of the pushdown engine: sets of stacks interned as the
//! states of a DFA built on demand, behind the index's [`Backend`] trait.
//!
//! * A **node** is one frame (fragment, state) with a pointer to the node
//!   below it ([`BOTTOM`]: nothing below) — a persistent stack. Nodes are
//!   interned, so equal stacks are one id. A node also keeps its depth and
//!   the shortest completion of its whole stack.
//! * A **set** is a closed set of nodes: every call expanded (the callee's
//!   start on top of the return frame), every finished frame popped. Only
//!   nodes that can read a text byte are kept; `accepting` says whether some
//!   stack finished its last frame. Sets are interned and numbered: they are
//!   the states the index sees, with a transition row per set over the byte
//!   classes, filled on first use.
//! * Masks are computed on a set's first visit (one walk of the vocabulary
//!   trie through the transition rows) and kept in write-once cells, so a
//!   mask once computed is read without a lock; the automaton itself sits
//!   behind a mutex, as in the lazy index.

use super::{Pda, INF};
use crate::index::trie::VocabTries;
use crate::index::{Backend, Classes, Slots, TokenSet, DEAD};
use crate::vocab::Vocabulary;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The empty stack.
const BOTTOM: u32 = 0;
/// "Some frames below, not looked at": the bottom of a truncated stack.
const OPAQUE: u32 = 1;
/// Frames kept by the truncations tried when sharing masks (shallow
/// configurations are walked as they are: a truncation that pops into the
/// frames cut off is a wasted walk).
const TRUNCATIONS: [u32; 2] = [6, 12];
/// A transition not computed yet.
const UNKNOWN: u32 = u32::MAX - 1;
/// Sets per mask chunk.
const CHUNK: usize = 4096;

#[derive(Clone, Copy, Debug)]
struct Node {
    frag: u16,
    state: u32,
    parent: u32,
    depth: u32,
    /// Shortest completion of the whole stack, in bytes, each frame
    /// within the room the depth limit leaves above it.
    dist: u32,
    /// The stack ends in [`OPAQUE`] (a truncated copy, for sharing masks).
    truncated: bool,
}

struct Set {
    nodes: Box<[u32]>,
    accepting: bool,
    /// Reached by popping into [`OPAQUE`]: a truncated configuration that
    /// cannot decide what follows (never the case for a real one).
    opaque: bool,
    dist: u32,
}

/// The automaton over sets, grown on demand.
struct Core {
    pda: Pda,
    nodes: Vec<Node>,
    node_ids: FastMap<(u16, u32, u32), u32>,
    sets: Vec<Set>,
    set_ids: FastMap<(Box<[u32]>, bool, bool), u32>,
    /// `trans[set * stride + class]`.
    trans: Vec<u32>,
    stride: usize,
    max_sets: usize,
    /// Limits that cut the language, in the order first hit.
    limits: Vec<String>,
    /// Set when a mask walk met an [`Set::opaque`] configuration.
    opaque_hit: bool,
    /// Longest token, in bytes (for the depth margin of truncation).
    max_token_len: u32,
    /// Scratch for closures.
    work: Vec<u32>,
    seen: FastMap<u32, ()>,
}

impl Core {
    fn hit_limit(&mut self, msg: String) {
        if !self.limits.contains(&msg) {
            self.limits.push(msg);
        }
    }

    /// The node (frag, state) over `parent` at `depth`, when it can still
    /// finish within the depth limit.
    fn node(&mut self, frag: u16, state: u32, parent: u32, depth: u32) -> Option<u32> {
        let f = &self.pda.frags[frag as usize];
        let need = f.need[state as usize];
        if need == INF {
            return None;
        }
        let truncated = self.nodes[parent as usize].truncated;
        if !truncated && depth.saturating_add(need) > self.pda.max_stack_depth {
            let knob = &self.pda.depth_knob;
            self.hit_limit(format!(
                "the stack depth limit {knob} was reached: deeper nesting is not offered"
            ));
            return None;
        }
        if let Some(&id) = self.node_ids.get(&(frag, state, parent)) {
            return Some(id);
        }
        // The frame's own way out within the room left above it (the
        // truncated copies, which only share masks, take the unbounded one).
        let own = if truncated {
            f.dist[state as usize]
        } else {
            f.dist_within(state, self.pda.max_stack_depth - depth)
        };
        let dist = own.saturating_add(self.nodes[parent as usize].dist);
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            frag,
            state,
            parent,
            depth,
            dist,
            truncated,
        });
        self.node_ids.insert((frag, state, parent), id);
        Some(id)
    }

    /// Closes `seeds` (calls expanded, finished frames popped) and interns
    /// the set; [`DEAD`] when nothing can follow.
    fn close(&mut self, seeds: &[u32]) -> u32 {
        let mut work = std::mem::take(&mut self.work);
        let mut seen = std::mem::take(&mut self.seen);
        work.clear();
        seen.clear();
        work.extend_from_slice(seeds);
        let mut out: Vec<u32> = Vec::new();
        let mut accepting = false;
        let mut opaque = false;
        while let Some(n) = work.pop() {
            if seen.insert(n, ()).is_some() {
                continue;
            }
            let Node {
                frag,
                state,
                parent,
                depth,
                ..
            } = self.nodes[n as usize];
            let f = &self.pda.frags[frag as usize];
            if f.has_text[state as usize] {
                out.push(n);
            }
            let acc = f.accepting[state as usize];
            let calls = f.calls[state as usize].clone();
            if acc {
                if parent == BOTTOM {
                    accepting = true;
                } else if parent == OPAQUE {
                    opaque = true;
                } else {
                    work.push(parent);
                }
            }
            for (g, r) in calls {
                let Some(ret) = self.node(frag, r, parent, depth) else {
                    continue;
                };
                let start = self.pda.frags[g as usize].start;
                if let Some(c) = self.node(g, start, ret, depth + 1) {
                    work.push(c);
                }
            }
        }
        self.work = work;
        self.seen = seen;
        out.sort_unstable();
        out.dedup();
        if out.len() > self.pda.max_stacks {
            // Keep the stacks closest to acceptance (each is live).
            out.sort_by_key(|&n| (self.nodes[n as usize].dist, n));
            out.truncate(self.pda.max_stacks);
            out.sort_unstable();
            let limit = self.pda.max_stacks;
            self.hit_limit(format!(
                "the limit GbnfOptions::max_stacks ({limit}) on the parses kept at once was \
                 reached: some parses of an ambiguous grammar were dropped"
            ));
        }
        if out.is_empty() && !accepting && !opaque {
            return DEAD;
        }
        self.intern_set(out, accepting, opaque)
    }

    /// The id of the closed set `nodes` (sorted), interned on first use.
    fn intern_set(&mut self, out: Vec<u32>, accepting: bool, opaque: bool) -> u32 {
        let key = (out.into_boxed_slice(), accepting, opaque);
        if let Some(&id) = self.set_ids.get(&key) {
            return id;
        }
        if self.sets.len() >= self.max_sets {
            let limit = self.max_sets;
            self.hit_limit(format!(
                "the pushdown engine interned more than {limit} configurations (the limit \
                 IndexConfig::max_states)"
            ));
            return DEAD;
        }
        let dist = if accepting {
            0
        } else {
            key.0
                .iter()
                .map(|&n| self.nodes[n as usize].dist)
                .min()
                .unwrap_or(INF)
        };
        let id = self.sets.len() as u32;
        self.sets.push(Set {
            nodes: key.0.clone(),
            accepting,
            opaque,
            dist,
        });
        self.set_ids.insert(key, id);
        self.trans.resize(self.sets.len() * self.stride, UNKNOWN);
        id
    }

    /// The set after byte `b` from set `s` ([`DEAD`]: no stack reads it).
    #[inline]
    fn next(&mut self, s: u32, b: u8) -> u32 {
        if s == DEAD {
            return DEAD;
        }
        let c = self.pda.classes[b as usize] as usize;
        let i = s as usize * self.stride + c;
        let t = self.trans[i];
        if t != UNKNOWN {
            return t;
        }
        let t = self.step(s, b);
        self.trans[s as usize * self.stride + c] = t;
        t
    }

    fn step(&mut self, s: u32, b: u8) -> u32 {
        let nodes = self.sets[s as usize].nodes.clone();
        let mut seeds = Vec::with_capacity(nodes.len());
        for &n in nodes.iter() {
            let Node {
                frag,
                state,
                parent,
                depth,
                ..
            } = self.nodes[n as usize];
            let t = self.pda.frags[frag as usize].next(state, b);
            if t != 0 {
                if let Some(m) = self.node(frag, t, parent, depth) {
                    seeds.push(m);
                }
            }
        }
        if seeds.is_empty() {
            return DEAD;
        }
        self.close(&seeds)
    }

    /// `s` with every stack cut to its top `k` frames over [`OPAQUE`]
    /// (`accepting` kept from `s`): a configuration whose mask is `s`'s
    /// when no walk from it pops into [`OPAQUE`]. `None` when no stack of
    /// `s` is deeper than `k`, or when `s` is so deep that a token's walk
    /// could meet the depth limit (which a truncated stack cannot see: the
    /// stack grows by at most a few frames per byte, since every cycle of
    /// calls reads a byte, left recursion being refused).
    fn truncate(&mut self, s: u32, k: u32) -> Option<u32> {
        let set = &self.sets[s as usize];
        let nodes = set.nodes.clone();
        let accepting = set.accepting;
        let deepest = nodes.iter().map(|&n| self.nodes[n as usize].depth).max()?;
        let nfrags = self.pda.frags.len() as u32;
        let margin = (self.max_token_len + 2).saturating_mul(nfrags + 1);
        if deepest <= k || deepest.saturating_add(margin) > self.pda.max_stack_depth {
            return None;
        }
        let mut out = Vec::with_capacity(nodes.len());
        let mut frames = Vec::new();
        for &n in nodes.iter() {
            frames.clear();
            let mut at = n;
            while at != BOTTOM && frames.len() < k as usize {
                let x = self.nodes[at as usize];
                frames.push((x.frag, x.state, x.depth));
                at = x.parent;
            }
            let mut parent = if at == BOTTOM { BOTTOM } else { OPAQUE };
            for &(f, st, d) in frames.iter().rev() {
                parent = self.truncated_node(f, st, parent, d);
            }
            out.push(parent);
        }
        out.sort_unstable();
        out.dedup();
        let t = self.intern_set(out, accepting, false);
        (t != DEAD).then_some(t)
    }

    /// A node over a (possibly) truncated parent, without the depth check
    /// (see [`Core::truncate`]).
    fn truncated_node(&mut self, frag: u16, state: u32, parent: u32, depth: u32) -> u32 {
        if let Some(&id) = self.node_ids.get(&(frag, state, parent)) {
            return id;
        }
        let p = self.nodes[parent as usize];
        let dist = self.pda.frags[frag as usize].dist[state as usize].saturating_add(p.dist);
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            frag,
            state,
            parent,
            depth,
            dist,
            truncated: p.truncated,
        });
        self.node_ids.insert((frag, state, parent), id);
        id
    }

    fn walk(&mut self, mut s: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            s = self.next(s, b);
            if s == DEAD {
                return DEAD;
            }
        }
        s
    }

    fn dist(&self, s: u32) -> u32 {
        self.sets.get(s as usize).map_or(INF, |x| x.dist)
    }
}

/// [`CHUNK`] write-once mask cells.
type MaskChunk = Box<[OnceLock<Arc<TokenSet>>]>;

/// A [`Pda`] behind the index's backend trait.
pub(crate) struct Engine {
    core: Mutex<Core>,
    start: u32,
    masks: Vec<OnceLock<MaskChunk>>,
    /// Masks of truncated configurations (`None`: a walk from it popped
    /// into the frames cut off, so it decides nothing).
    shared: Mutex<FastMap<u32, Option<Arc<TokenSet>>>>,
    distinct: Mutex<FastMap<u64, Vec<Arc<TokenSet>>>>,
    /// The pushdown's joint byte classes (for the index's shared algorithms).
    classes: Classes,
    /// The memo of the fewest-tokens budget per configuration.
    budgets: Slots,
}

impl Engine {
    /// The engine of `pda` with room for `max_sets` configurations; `None`
    /// when the start configuration cannot be completed.
    pub fn new(pda: Pda, max_sets: usize) -> Option<Engine> {
        let stride = pda.reps.len();
        let max_sets = max_sets.max(1);
        let mut core = Core {
            pda,
            nodes: vec![
                Node {
                    frag: 0,
                    state: 0,
                    parent: BOTTOM,
                    depth: 0,
                    dist: 0,
                    truncated: false,
                },
                Node {
                    frag: u16::MAX,
                    state: 0,
                    parent: OPAQUE,
                    depth: 0,
                    dist: 0,
                    truncated: true,
                },
            ],
            node_ids: FastMap::default(),
            sets: Vec::new(),
            set_ids: FastMap::default(),
            trans: Vec::new(),
            stride,
            max_sets,
            limits: Vec::new(),
            opaque_hit: false,
            max_token_len: 0,
            work: Vec::new(),
            seen: FastMap::default(),
        };
        let root = core.pda.frags[0].start;
        let n = core.node(0, root, BOTTOM, 1)?;
        let start = core.close(&[n]);
        if start == DEAD {
            return None;
        }
        let classes = Classes::new(&core.pda.classes);
        Some(Engine {
            budgets: Slots::new(max_sets),
            classes,
            core: Mutex::new(core),
            start,
            masks: (0..max_sets.div_ceil(CHUNK))
                .map(|_| OnceLock::new())
                .collect(),
            distinct: Mutex::new(FastMap::default()),
            shared: Mutex::new(FastMap::default()),
        })
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        // Every update is finished before the next one starts reading it
        // (rows are written after their set exists), so a poisoned lock is
        // entered anyway.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cell(&self, s: u32) -> Option<&OnceLock<Arc<TokenSet>>> {
        let chunk = self.masks.get(s as usize / CHUNK)?.get_or_init(|| {
            (0..CHUNK)
                .map(|_| OnceLock::new())
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        Some(&chunk[s as usize % CHUNK])
    }

    /// The mask of `s`: through a truncated copy of its stacks when one
    /// decides it (so configurations that differ only deep in their stacks
    /// share one walk), else by walking from `s` itself.
    fn compute(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Arc<TokenSet> {
        // Truncated copies are a shortcut that must never decide a mask the
        // real configuration would not: once a limit has been hit (stacks
        // pruned, configurations refused) or the table is half full, walk
        // the real configuration, whose successors are then interned (or
        // refused, so never allowed).
        let shortcut_ok =
            |core: &Core| core.limits.is_empty() && core.sets.len() < core.max_sets / 2;
        for k in TRUNCATIONS {
            let Some(t) = ({
                let mut core = self.core();
                core.max_token_len = tries.full.max_depth as u32;
                if !shortcut_ok(&core) {
                    break;
                }
                core.truncate(s, k)
            }) else {
                continue;
            };
            let known = self
                .shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&t)
                .cloned();
            let m = match known {
                Some(m) => m,
                None => {
                    let m = self.walk_mask(t, tries, vocab);
                    if !shortcut_ok(&self.core()) {
                        break;
                    }
                    self.shared
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(t, m.clone());
                    m
                }
            };
            if let Some(m) = m {
                return m;
            }
        }
        self.walk_mask(s, tries, vocab)
            .expect("a configuration without truncated stacks never pops into one")
    }

    /// One walk of the vocabulary trie from `s`; `None` when it popped into
    /// a truncated stack's missing frames.
    fn walk_mask(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<Arc<TokenSet>> {
        let mut set = TokenSet::new(vocab.logits_width());
        {
            let mut core = self.core();
            core.opaque_hit = false;
            let trie = &tries.full;
            trie.walk(
                s,
                |x, b| {
                    if core.opaque_hit {
                        // Undecided: finish the walk at once.
                        return DEAD;
                    }
                    let t = core.next(x, b);
                    if t != DEAD && core.sets[t as usize].opaque {
                        core.opaque_hit = true;
                        return DEAD;
                    }
                    t
                },
                |t| set.insert(crate::TokenId(t)),
            );
            if std::mem::take(&mut core.opaque_hit) {
                return None;
            }
            for &(first, dup) in &trie.dups {
                if set.contains(crate::TokenId(first)) {
                    set.insert(crate::TokenId(dup));
                }
            }
            if core.sets[s as usize].accepting {
                for &e in vocab.eos() {
                    set.insert(e);
                }
            }
        }
        use std::hash::BuildHasher;
        let key = foldhash::fast::FixedState::default().hash_one(&set);
        let mut distinct = self.distinct.lock().unwrap_or_else(|p| p.into_inner());
        let same = distinct.entry(key).or_default();
        if let Some(a) = same.iter().find(|a| ***a == set) {
            return Some(a.clone());
        }
        let a = Arc::new(set);
        same.push(a.clone());
        Some(a)
    }

    /// Distinct masks computed so far and their memory.
    pub fn mask_memory(&self) -> (usize, usize) {
        let distinct = self.distinct.lock().unwrap_or_else(|p| p.into_inner());
        let n: usize = distinct.values().map(Vec::len).sum();
        let bytes = distinct.values().flatten().map(|a| a.memory_usage()).sum();
        (n, bytes)
    }

    /// Configurations interned so far.
    pub fn configurations(&self) -> usize {
        self.core().sets.len()
    }
}

impl Backend for Engine {
    fn start(&self) -> u32 {
        self.start
    }

    fn num_states(&self) -> usize {
        self.configurations()
    }

    fn is_accepting(&self, s: u32) -> bool {
        let core = self.core();
        core.sets.get(s as usize).is_some_and(|x| x.accepting)
    }

    fn allowed(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<&TokenSet> {
        let cell = self.cell(s)?;
        Some(cell.get_or_init(|| self.compute(s, tries, vocab)))
    }

    fn walk(&self, s: u32, bytes: &[u8]) -> u32 {
        self.core().walk(s, bytes)
    }

    fn next_byte(&self, s: u32, b: u8) -> u32 {
        self.core().next(s, b)
    }

    fn dist(&self, s: u32) -> u32 {
        self.core().dist(s)
    }

    fn classes(&self) -> &Classes {
        &self.classes
    }

    fn budgets(&self) -> &Slots {
        &self.budgets
    }

    fn memory_usage(&self) -> usize {
        self.mask_memory().1
    }

    fn limit_error(&self) -> Option<String> {
        let core = self.core();
        (!core.limits.is_empty()).then(|| core.limits.join("; "))
    }
}

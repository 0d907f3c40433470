//! # The pushdown engine: sets of stacks of fragments, as a DFA built on demand
//!
//! The third index engine, beside `eager.rs` and `lazy/`: it runs a
//! [`Pda`] (the grammar fragments that call one another, built by
//! [`crate::pda`] from a GBNF grammar or a recursive JSON Schema) behind
//! the index's [`Backend`] trait, so the matcher walks it like any other
//! index.
//!
//! ## A DFA over sets of stacks
//!
//! A configuration of the pushdown automaton is a *stack of frames* (fragment,
//! DFA state); the top frame is where text is read, the frames below hold the
//! return states. Because calls and returns read no bytes, and a grammar may
//! be ambiguous, the matcher is in a small **set** of stacks at once. The
//! engine interns stacks as persistent linked lists (a frame and
//! a parent pointer: pushing is one node, popping is following the pointer,
//! and equal stacks share their nodes) and interns each *closed* set of
//! stacks (calls expanded, finished fragments returned) as one state of a
//! lazily built DFA. That DFA is what the [`TokenIndex`](crate::TokenIndex)
//! walks: per state a transition row filled on first use and a mask computed
//! on first visit and then shared by every matcher of the compiled grammar.
//! So the [`Matcher`](crate::Matcher) keeps its one-state-per-token history
//! and `rollback` restores the stack with a pop, exactly as for a regular
//! source.
//!
//! ## Masks: XGrammar's split
//!
//! Distinct stacks are distinct configurations, so first visits are many;
//! a whole walk of the vocabulary trie per configuration made them the
//! cost of a step (milliseconds). A configuration's mask is instead the
//! union over its stacks of two halves:
//!
//! * the **context-independent** tokens of the top frame (fragment,
//!   state): one trie walk from that frame cut from the stack below (its
//!   frames sit over an opaque bottom), computed once and shared by every
//!   configuration, at any depth, whose stack has that top frame. A token
//!   counts when some walk reads all its bytes without returning into the
//!   frames below, or returns exactly at its last byte (every frame below
//!   can finish, so any context takes it). The frames of a fragment that
//!   calls only itself (the schema front end's "any JSON value") are shared
//!   further: by every engine over the vocabulary.
//! * the **exit tokens**: the walk records the trie nodes at which some
//!   stack returned into the frames below with bytes left; the longer
//!   tokens through them are walked on from the closure of the real frame
//!   below, memoized per (top frame, frame below). Those walks cover only
//!   the exits' subtrees (a `,`, `]` or `}` and what may follow), not the
//!   vocabulary.
//!
//! The frame's walk assumed room above it for the frames it opened (it
//! records the most, `reach`); a stack so near the depth limit that it has
//! less, or an engine that has hit a limit (stacks pruned, configurations
//! refused), gets the whole walk of its real configuration instead, so the
//! split never decides a mask the real configuration would not.
//! `IndexConfig::pda_split = false` walks every configuration whole (the
//! tests compare the two mask for mask).
//!
//! ## Data structures
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
//! * Masks are computed on a set's first visit and kept in write-once
//!   cells (`arena.rs`), so a mask once computed is read without a lock;
//!   the automaton itself sits behind a mutex, as in the lazy index. A mask
//!   is the union over the set's stacks of the top frame's [`FrameMask`]
//!   (one trie walk per top frame, shared by every configuration with it;
//!   per vocabulary for a shared fragment) and its exit tokens resolved
//!   against the node below (memoized per pair). See
//!   `docs/design/pushdown.md`.

use super::arena::{Arena, Slots};
use super::backend::{Backend, Classes};
use super::{plain_successors, LimitHit, PlainReps};
use crate::pda::{Pda, INF};
use crate::vocab::trie::{self, VocabTries, DEAD};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The empty stack.
const BOTTOM: u32 = 0;
/// "Some frames below, not looked at": the bottom of a truncated stack.
const OPAQUE: u32 = 1;
/// A transition not computed yet.
const UNKNOWN: u32 = u32::MAX - 1;
/// Mask cells in the first segment of [`Engine::masks`] (doubling from there).
const MASK_BASE: usize = 64;
/// Most states the search for an unlimited free part visits (past it the
/// frame is walked as usual).
const PLAIN_SEARCH: usize = 4096;

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
    /// Most `depth + need` over the nodes its closures touched: for a
    /// frame walk over [`OPAQUE`] (depths relative to the frame), how
    /// much room above the frame the walk assumed.
    reach: u32,
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
    limits: Vec<LimitHit>,
    /// Scratch for closures.
    work: Vec<u32>,
    seen: FastMap<u32, ()>,
    /// Per set: its node when it is one whole stack in a string body.
    body_sets: FastMap<u32, Option<u32>>,
    /// Per (fragment, state, whole stack): [`Engine::plain_reach`]'s
    /// answer (known for every state a search met).
    unlimited: FastMap<(u16, u32, bool), Option<u32>>,
}

impl Core {
    fn hit_limit(&mut self, msg: LimitHit) {
        if !self.limits.contains(&msg) {
            self.limits.push(msg);
        }
    }

    /// The node (frag, state) over `parent` at `depth`, when it can still
    /// finish within the depth limit.
    fn node(&mut self, frag: u16, state: u32, parent: u32, depth: u32) -> Option<u32> {
        self.ensure(frag, state);
        let f = &self.pda.frags[frag as usize];
        let need = f.need[state as usize];
        if need == INF {
            return None;
        }
        let truncated = self.nodes[parent as usize].truncated;
        if !truncated && depth.saturating_add(need) > self.pda.max_stack_depth {
            let knob = self.pda.depth_knob.clone();
            self.hit_limit(LimitHit::StackDepth { knob });
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
        let mut reach = 0u32;
        while let Some(n) = work.pop() {
            if seen.insert(n, ()).is_some() {
                continue;
            }
            reach = reach.max(self.reach_of(n));
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
                reach = reach.max(self.reach_of(ret));
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
            self.hit_limit(LimitHit::Stacks { limit });
        }
        if out.is_empty() && !accepting && !opaque {
            return DEAD;
        }
        self.intern_set(out, accepting, opaque, reach)
    }

    /// Fills the per-state data of a lazy fragment's `state` (see
    /// [`super::lazy`]), and reports a limit its DFA hit.
    #[inline]
    fn ensure(&mut self, frag: u16, state: u32) {
        let f = &mut self.pda.frags[frag as usize];
        if f.is_lazy() {
            f.ensure(state);
            if let Some(msg) = f.take_lazy_limit() {
                self.hit_limit(msg);
            }
        }
    }

    /// `depth + need` of node `n`: the depth its stack must be allowed.
    fn reach_of(&self, n: u32) -> u32 {
        let x = self.nodes[n as usize];
        let need = self.pda.frags[x.frag as usize].need[x.state as usize];
        x.depth.saturating_add(need)
    }

    /// The id of the closed set `nodes` (sorted), interned on first use.
    fn intern_set(&mut self, out: Vec<u32>, accepting: bool, opaque: bool, reach: u32) -> u32 {
        let key = (out.into_boxed_slice(), accepting, opaque);
        if let Some(&id) = self.set_ids.get(&key) {
            let r = &mut self.sets[id as usize].reach;
            *r = (*r).max(reach);
            return id;
        }
        if self.sets.len() >= self.max_sets {
            let limit = self.max_sets;
            self.hit_limit(LimitHit::Configurations { limit });
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
            reach,
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

    /// A node over a (possibly) truncated parent, without the depth check:
    /// the top frame of a stack cut to it over [`OPAQUE`], whose walk
    /// records the room it assumed ([`Set::reach`]) instead.
    fn truncated_node(&mut self, frag: u16, state: u32, parent: u32, depth: u32) -> u32 {
        if let Some(&id) = self.node_ids.get(&(frag, state, parent)) {
            return id;
        }
        self.ensure(frag, state);
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

/// The context-independent half of a top frame's mask.
struct FrameMask {
    /// The tokens some walk from the frame accepts without returning into
    /// the frames below before its last byte (a return at the last byte is
    /// accepted whatever lies below: every frame below can finish).
    inside: TokenSet,
    /// Trie nodes at which some walk returned into the frames below with
    /// bytes left: the longer tokens through them are decided there.
    exits: Vec<u32>,
    /// Which trie the walk went over (`exits` are its nodes).
    trie: Walked,
    /// Most `depth + need` the walk met, depths counted from the frame at
    /// 1: the walk is the real one for a frame at depth `d` when
    /// `reach + d - 1` is within the stack limit.
    reach: u32,
}

/// The frame masks of one shared fragment, by its DFA state.
type SharedFrames = Mutex<FastMap<u32, Arc<FrameMask>>>;

/// The vocabulary's cache of the shared fragment keyed `key`.
fn shared_frames(tries: &VocabTries, key: &str) -> Arc<SharedFrames> {
    let mut all = tries.shared.0.lock().unwrap_or_else(|p| p.into_inner());
    let entry = all
        .entry(key.to_string())
        .or_insert_with(|| Arc::new(SharedFrames::default()));
    match entry.clone().downcast::<SharedFrames>() {
        Ok(c) => c,
        Err(_) => {
            // Another module's entry under the same key (keys are
            // prefixed, so never): a private cache.
            Arc::new(SharedFrames::default())
        }
    }
}

/// The trie a frame's walk went over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walked {
    /// The whole vocabulary.
    Full,
    /// A string body: the vocabulary's string-body suffix trie
    /// (`trie::BodyTries::body_suffixes`), every plain token allowed.
    Body,
    /// A frame no plain text kills ([`Engine::plain_reach`], with the most
    /// frames its plain texts' states need): the last plain level's `rest`
    /// trie, every plain token allowed.
    Rest(u32),
}

/// What a frame's walk has found so far ([`Engine::walk_nodes`]).
struct FrameWalk {
    inside: TokenSet,
    exits: Vec<u32>,
    reach: u32,
    /// Nodes left to settle: (trie node, string-body node, its set).
    settle: Vec<(usize, u32, u32)>,
}

/// A [`Pda`] behind the index's backend trait.
pub(crate) struct Engine {
    core: Mutex<Core>,
    start: u32,
    /// Write-once mask cells, one per configuration.
    masks: Arena<OnceLock<Arc<TokenSet>>>,
    /// The context-independent half of each top frame's mask, by frame
    /// key (see [`Engine::frame`]).
    frames: Mutex<FastMap<u32, Arc<FrameMask>>>,
    /// The exit tokens of a frame key resolved against the stack below
    /// it, by (frame key, parent node).
    resolved: Mutex<FastMap<(u32, u32), Arc<[u32]>>>,
    /// The plain characters' byte representatives (string-body frames).
    plain: PlainReps,
    /// Whether masks are split per top frame (else each configuration is
    /// one walk of the trie; kept for the tests that compare the two).
    split: bool,
    distinct: Mutex<FastMap<u64, Vec<Arc<TokenSet>>>>,
    /// The pushdown's joint byte classes (for the index's shared algorithms).
    classes: Classes,
    /// The memo of the fewest-tokens budget per configuration.
    budgets: Slots,
    /// Frames whose walk took every plain token at once
    /// ([`Engine::plain_loop`]).
    past_plain: std::sync::atomic::AtomicUsize,
}

impl Engine {
    /// The engine of `pda` with room for `max_sets` configurations, masks
    /// split per top frame when `split`; `None`
    /// when the start configuration cannot be completed.
    pub fn new(pda: Pda, max_sets: usize, split: bool) -> Option<Engine> {
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
            work: Vec::new(),
            seen: FastMap::default(),
            body_sets: FastMap::default(),
            unlimited: FastMap::default(),
        };
        for f in &mut core.pda.frags {
            f.set_max_states(max_sets);
        }
        let root = core.pda.frags[0].start;
        let n = core.node(0, root, BOTTOM, 1)?;
        let start = core.close(&[n]);
        if start == DEAD {
            return None;
        }
        let classes = Classes::new(&core.pda.classes);
        let plain = PlainReps::new(&core.pda.classes);
        Some(Engine {
            plain,
            budgets: Slots::new(max_sets),
            classes,
            core: Mutex::new(core),
            start,
            masks: Arena::new(max_sets, 1, MASK_BASE),
            distinct: Mutex::new(FastMap::default()),
            frames: Mutex::new(FastMap::default()),
            resolved: Mutex::new(FastMap::default()),
            split,
            past_plain: Default::default(),
        })
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        // Every update is finished before the next one starts reading it
        // (rows are written after their set exists), so a poisoned lock is
        // entered anyway.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cell(&self, s: u32) -> Option<&OnceLock<Arc<TokenSet>>> {
        Some(&self.masks.get_or_alloc(s as usize)?[0])
    }

    /// The mask of `s`. Split (XGrammar's context-independent /
    /// context-dependent tokens): the union over its stacks of the top
    /// frame's [`FrameMask`] (shared by every stack with that top frame)
    /// and its exit tokens resolved against the frames below (memoized per
    /// top frame and parent node). Walked whole instead when a limit has
    /// been hit (stacks pruned, configurations refused: the shared halves
    /// must never decide what the real configuration would not) or the
    /// table is half full, and for a stack so near the depth limit that its
    /// top frame's walk assumed room it does not have.
    fn compute(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Arc<TokenSet> {
        if self.split {
            if let Some(set) = self.split_mask(s, tries, vocab) {
                return self.distinct(set);
            }
        }
        self.walk_mask(s, tries, vocab)
    }

    /// Whether the shared halves may be used and stored.
    fn shortcut_ok(core: &Core) -> bool {
        core.limits.is_empty() && core.sets.len() < core.max_sets / 2
    }

    fn split_mask(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<TokenSet> {
        let (nodes, accepting, max_depth) = {
            let core = self.core();
            if !Self::shortcut_ok(&core) {
                return None;
            }
            let set = &core.sets[s as usize];
            (set.nodes.clone(), set.accepting, core.pda.max_stack_depth)
        };
        let mut out = TokenSet::new(vocab.logits_width());
        for &n in nodes.iter() {
            let (key, node) = {
                let mut core = self.core();
                let x = core.nodes[n as usize];
                if x.parent == BOTTOM {
                    (n, x)
                } else {
                    (core.truncated_node(x.frag, x.state, OPAQUE, 1), x)
                }
            };
            let fm = self.frame(key, tries, vocab)?;
            if node.parent != BOTTOM && fm.reach > max_depth + 1 - node.depth {
                return None;
            }
            out.union_with(&fm.inside);
            if node.parent != BOTTOM && !fm.exits.is_empty() {
                for &t in self.resolve(key, node.parent, &fm, tries)?.iter() {
                    out.insert(TokenId(t));
                }
            }
        }
        for &(first, dup) in &tries.full.dups {
            if out.contains(TokenId(first)) {
                out.insert(TokenId(dup));
            }
        }
        if accepting {
            for &e in vocab.eos() {
                out.insert(e);
            }
        }
        Some(out)
    }

    /// The context-independent half of the frame `key` (a node over
    /// [`OPAQUE`], or a whole stack over [`BOTTOM`]): one walk of the trie
    /// from its closure, computed once and shared by every configuration
    /// with that top frame. `None` when a limit was hit on the way.
    fn frame(&self, key: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<Arc<FrameMask>> {
        if let Some(f) = self
            .frames
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Some(f.clone());
        }
        // A frame of a fragment shared by every engine over the vocabulary
        // (over [`OPAQUE`]: its walk sees that fragment only).
        let shared = {
            let core = self.core();
            let x = core.nodes[key as usize];
            match (&core.pda.share[x.frag as usize], x.parent == OPAQUE) {
                (Some(k), true) => Some((shared_frames(tries, k), x.state)),
                _ => None,
            }
        };
        if let Some((cache, state)) = &shared {
            let known = cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(state)
                .cloned();
            if let Some(fm) = known {
                self.frames
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, fm.clone());
                return Some(fm);
            }
        }
        let mut core = self.core();
        // A string body (every plain character leads the frame's state back
        // to itself, and it neither calls nor returns): the plain tokens and
        // those ending inside a character are all allowed, and every other
        // token's fate is its suffix after its plain prefix (the lazy
        // index's string-body split, `trie::BodyTries`), so only the
        // suffixes are walked, not the vocabulary.
        let kind = if Self::is_body(&self.plain, &mut core, key) {
            Walked::Body
        } else if let Some(need) = Self::plain_reach(&self.plain, &mut core, key) {
            // No plain text kills the frame (a property name beside extra
            // keys): every plain token is allowed, and only the other
            // tokens are walked (the lazy index's unlimited plain level).
            Walked::Rest(need)
        } else {
            Walked::Full
        };
        let last = trie::PLAIN_LEVELS.len() - 1;
        let mut w = FrameWalk {
            inside: TokenSet::new(vocab.logits_width()),
            exits: Vec::new(),
            reach: 0,
            settle: Vec::new(),
        };
        let trie = match kind {
            Walked::Body => {
                w.inside.union_with(&tries.plain_level(last).set);
                w.inside.union_with(&tries.body().body_partial.0);
                &tries.body().body_suffixes
            }
            Walked::Rest(need) => {
                w.inside.union_with(&tries.plain_level(last).set);
                // The plain texts' frames are the frame's own (plus the
                // frames their states need), so the walk assumed that room.
                w.reach = 1 + need;
                &tries.plain_level(last).rest
            }
            Walked::Full => &tries.full,
        };
        let start = core.close(&[key]);
        if start == DEAD || !Self::shortcut_ok(&core) {
            return None;
        }
        w.reach = w.reach.max(core.sets[start as usize].reach);
        // Where a walk past plain text enters a string body on a whole
        // plain character, the tokens below share that body's fate: they
        // are settled by the body's own frame.
        let boundary =
            matches!(kind, Walked::Rest(_)).then(|| &tries.body().body_rest_boundary[..]);
        self.walk_nodes(&mut core, trie, 0..trie.len(), 0, start, boundary, &mut w);
        if !Self::shortcut_ok(&core) {
            return None;
        }
        drop(core);
        for (i, g, t) in std::mem::take(&mut w.settle) {
            let gm = self.frame(g, tries, vocab)?;
            w.reach = w.reach.max(gm.reach);
            let end = trie.end[i] as usize;
            if gm.exits.is_empty() {
                for &tok in &trie.token[i..end] {
                    if tok != trie::NONE && gm.inside.contains(TokenId(tok)) {
                        w.inside.insert(TokenId(tok));
                    }
                }
            } else {
                // The body returns within some tokens: walk them here.
                if trie.token[i] != trie::NONE {
                    w.inside.insert(TokenId(trie.token[i]));
                }
                let mut core = self.core();
                let base = trie.depth[i] as usize;
                self.walk_nodes(&mut core, trie, i + 1..end, base, t, None, &mut w);
                if !Self::shortcut_ok(&core) {
                    return None;
                }
            }
        }
        if matches!(kind, Walked::Rest(_)) {
            self.past_plain
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let FrameWalk {
            mut inside,
            exits,
            reach,
            ..
        } = w;
        for &(first, dup) in &trie.dups {
            if inside.contains(TokenId(first)) {
                inside.insert(TokenId(dup));
            }
        }
        let fm = Arc::new(FrameMask {
            inside,
            exits,
            trie: kind,
            reach,
        });
        self.frames
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, fm.clone());
        if let Some((cache, state)) = shared {
            cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(state, fm.clone());
        }
        Some(fm)
    }

    /// Walks `trie`'s nodes `nodes` (the whole trie, or the descendants of
    /// a node at depth `base`) from set `start`, into `w`: tokens read
    /// whole, nodes where some stack returned with bytes left, the room
    /// assumed. With `boundary`, a node of whole plain characters whose set
    /// is a string body other than `start` is left for
    /// [`Engine::frame`] to settle.
    #[allow(clippy::too_many_arguments)]
    fn walk_nodes(
        &self,
        core: &mut Core,
        trie: &trie::TokenTrie,
        nodes: std::ops::Range<usize>,
        base: usize,
        start: u32,
        boundary: Option<&[bool]>,
        w: &mut FrameWalk,
    ) {
        let mut stack = vec![0u32; trie.max_depth + 1];
        stack[0] = start;
        let mut i = nodes.start;
        while i < nodes.end {
            let d = trie.depth[i] as usize - base;
            let t = core.next(stack[d - 1], trie.byte[i]);
            if t == DEAD {
                i = trie.end[i] as usize;
                continue;
            }
            if let Some(boundary) = boundary {
                if boundary[i] && t != start {
                    if let Some(g) = Self::body_set(&self.plain, core, t) {
                        w.settle.push((i, g, t));
                        i = trie.end[i] as usize;
                        continue;
                    }
                }
            }
            let set = &core.sets[t as usize];
            w.reach = w.reach.max(set.reach);
            if set.opaque && (trie.end[i] as usize) > i + 1 {
                // Some stack returned into the frames below here: the
                // longer tokens through this node are decided there.
                w.exits.push(i as u32);
            }
            stack[d] = t;
            let tok = trie.token[i];
            if tok != trie::NONE {
                w.inside.insert(TokenId(tok));
            }
            i += 1;
        }
    }

    /// When no plain text kills frame `key` nor makes it call or return:
    /// the most frames any state plain text leads it to needs above it
    /// (the walk's room). A whole stack (over [`BOTTOM`]) asks this of its
    /// free part (the other keys' trie and its free tail, see
    /// `dfa/free.rs`: the declared names' threads die, but not the part),
    /// where calls and ends are harmless (no frame below to return into);
    /// a frame over [`OPAQUE`] asks it of its whole state. Searched once
    /// per object: every state plain text leads to is answered then.
    fn plain_reach(plain: &PlainReps, core: &mut Core, key: u32) -> Option<u32> {
        let x = core.nodes[key as usize];
        let whole = x.parent == BOTTOM;
        let from = if whole {
            core.pda.frags[x.frag as usize]
                .lazy_dfa()?
                .free_part(x.state)?
        } else if x.parent == OPAQUE {
            x.state
        } else {
            return None;
        };
        let memo = (x.frag, from, whole);
        if let Some(&known) = core.unlimited.get(&memo) {
            return known;
        }
        let (mut cur, mut next, mut out) = (Vec::new(), Vec::new(), Vec::new());
        let mut seen: FastMap<u32, ()> = FastMap::default();
        seen.insert(from, ());
        let mut work = vec![from];
        let mut need = 0u32;
        let answer = loop {
            let Some(q) = work.pop() else {
                break Some(need);
            };
            if seen.len() > PLAIN_SEARCH {
                break None;
            }
            if !whole {
                core.ensure(x.frag, q);
                let f = &core.pda.frags[x.frag as usize];
                if f.accepting[q as usize] || !f.calls[q as usize].is_empty() {
                    break None;
                }
                need = need.max(f.need[q as usize]);
            }
            out.clear();
            let f = &mut core.pda.frags[x.frag as usize];
            let step = |s: u32, b: u8| match f.next(s, b) {
                0 => DEAD,
                t => t,
            };
            if !plain_successors(step, q, plain, &mut cur, &mut next, &mut out) {
                break None;
            }
            for &t in &out {
                if seen.insert(t, ()).is_none() {
                    work.push(t);
                }
            }
        };
        match answer {
            // Every state met is as unlimited, within the same room.
            Some(_) => {
                for &q in seen.keys() {
                    core.unlimited.insert((x.frag, q, whole), answer);
                }
            }
            None => {
                core.unlimited.insert(memo, None);
            }
        }
        answer
    }

    /// The node of set `t` when it is one stack (whole, or one frame over
    /// [`OPAQUE`]) whose frame is a string body ([`Engine::is_body`]),
    /// memoized per set.
    fn body_set(plain: &PlainReps, core: &mut Core, t: u32) -> Option<u32> {
        if let Some(&known) = core.body_sets.get(&t) {
            return known;
        }
        let set = &core.sets[t as usize];
        let answer = match *set.nodes {
            [n] if !set.accepting && !set.opaque => {
                let parent = core.nodes[n as usize].parent;
                ((parent == BOTTOM || parent == OPAQUE) && Self::is_body(plain, core, n))
                    .then_some(n)
            }
            _ => None,
        };
        core.body_sets.insert(t, answer);
        answer
    }

    /// Whether the frame `key` is a string body: its state neither calls
    /// nor returns, and every plain character leads it back to itself
    /// through text transitions (so a plain prefix leaves the frame, and
    /// the whole closure, as it was).
    fn is_body(plain: &PlainReps, core: &mut Core, key: u32) -> bool {
        let x = core.nodes[key as usize];
        let f = &mut core.pda.frags[x.frag as usize];
        let s = x.state;
        if !f.calls[s as usize].is_empty() || f.accepting[s as usize] || !f.has_text[s as usize] {
            return false;
        }
        let (mut cur, mut next, mut out) = (Vec::new(), Vec::new(), Vec::new());
        let step = |q: u32, b: u8| match f.next(q, b) {
            0 => DEAD,
            t => t,
        };
        plain_successors(step, s, plain, &mut cur, &mut next, &mut out)
            && out.iter().all(|&t| t == s)
    }

    /// The exit tokens of frame `key` that the stack `parent` takes: each
    /// exit's longer tokens walked on from the closure of `parent` (a
    /// real stack, so exact). Memoized per (frame key, parent).
    fn resolve(
        &self,
        key: u32,
        parent: u32,
        fm: &FrameMask,
        tries: &VocabTries,
    ) -> Option<Arc<[u32]>> {
        if let Some(r) = self
            .resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(key, parent))
        {
            return Some(r.clone());
        }
        let trie = match fm.trie {
            Walked::Body => &tries.body().body_suffixes,
            Walked::Rest(_) => &tries.plain_level(trie::PLAIN_LEVELS.len() - 1).rest,
            Walked::Full => &tries.full,
        };
        let mut toks = Vec::new();
        let mut core = self.core();
        let start = core.close(&[parent]);
        if start != DEAD {
            let mut stack = vec![0u32; trie.max_depth + 1];
            for &x in &fm.exits {
                let x = x as usize;
                let base = trie.depth[x] as usize;
                stack[0] = start;
                let end = trie.end[x] as usize;
                let mut i = x + 1;
                while i < end {
                    let d = trie.depth[i] as usize - base;
                    let t = core.next(stack[d - 1], trie.byte[i]);
                    if t == DEAD {
                        i = trie.end[i] as usize;
                        continue;
                    }
                    stack[d] = t;
                    let tok = trie.token[i];
                    if tok != trie::NONE {
                        toks.push(tok);
                    }
                    i += 1;
                }
            }
        }
        if !Self::shortcut_ok(&core) {
            return None;
        }
        drop(core);
        trie.with_dups(&mut toks);
        let r: Arc<[u32]> = toks.into();
        self.resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((key, parent), r.clone());
        Some(r)
    }

    /// One walk of the vocabulary trie from the whole configuration `s`.
    fn walk_mask(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Arc<TokenSet> {
        let mut set = TokenSet::new(vocab.logits_width());
        {
            let mut core = self.core();
            let trie = &tries.full;
            trie.walk(s, |x, b| core.next(x, b), |t| set.insert(TokenId(t)));
            for &(first, dup) in &trie.dups {
                if set.contains(TokenId(first)) {
                    set.insert(TokenId(dup));
                }
            }
            if core.sets[s as usize].accepting {
                for &e in vocab.eos() {
                    set.insert(e);
                }
            }
        }
        self.distinct(set)
    }

    /// The one shared copy of `set` among the masks computed so far.
    fn distinct(&self, set: TokenSet) -> Arc<TokenSet> {
        use std::hash::BuildHasher;
        let key = foldhash::fast::FixedState::default().hash_one(&set);
        let mut distinct = self.distinct.lock().unwrap_or_else(|p| p.into_inner());
        let same = distinct.entry(key).or_default();
        if let Some(a) = same.iter().find(|a| ***a == set) {
            return a.clone();
        }
        let a = Arc::new(set);
        same.push(a.clone());
        a
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

    fn frames_past_plain_text(&self) -> usize {
        self.past_plain.load(std::sync::atomic::Ordering::Relaxed)
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

    fn limit_error(&self) -> Option<LimitHit> {
        self.core().limits.first().cloned()
    }
}

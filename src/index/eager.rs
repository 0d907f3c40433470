//! # The eager backend: every mask computed when the index is built
//!
//! Over a DFA small enough to determinize up front, [`Eager`] compacts it to
//! its live states ([`LiveTable`]), computes every state's budget (the greedy
//! tokenization of its canonical shortest completion, in order of distance
//! to acceptance) and every state's mask: states are grouped by
//! bounded-horizon equivalence so one walk of the short-token trie serves a
//! class, long tokens are walked per state, and equal masks are stored once
//! (see the module essay of [`super`]). With a vocabulary that lacks some
//! single bytes it also prunes token-level dead ends
//! ([`Eager::enforce_token_liveness`]).

use super::arena::Slots;
use super::backend::{self, Backend, Classes};
use super::class_walks::{short_walks, Walked};
use super::steps::reverse_reach;
use super::{
    plain_successors, ByteAutomaton, FastMap, IndexConfig, IndexError, IndexStats, LiveTable,
    PlainReps, NO_LEVEL,
};
use crate::vocab::trie::{self, TokenTrie, VocabTries, DEAD};
use crate::vocab::{mix, TokenId, TokenSet, Vocabulary};
use rayon::prelude::*;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The eager index's per-state tables.
pub(super) struct Eager {
    table: LiveTable,
    masks: Vec<OnceLock<Arc<TokenSet>>>,
    classes: Classes,
    /// Upper bound on tokens to acceptance, per state (`u32::MAX`: unknown),
    /// all filled at build ([`backend::budget`]).
    budgets: Slots,
    /// The largest known budget.
    max_budget: Option<u32>,
    /// Token-level liveness, when the vocabulary lacks single bytes (see
    /// `enforce_token_liveness`); `None`: byte-live implies token-live.
    token_live: Option<Vec<bool>>,
    /// Per state, the plain level whose tokens are all allowed there
    /// (`NO_LEVEL`: none; see [`plain_reach`]).
    plain_level: Vec<u8>,
}

impl Eager {
    /// Compacts `automaton` and builds its index (every mask when
    /// `config.eager`, else masks on first use), filling `stats`.
    pub(super) fn build<A: ByteAutomaton>(
        automaton: &A,
        tries: &VocabTries,
        vocab: &Vocabulary,
        config: &IndexConfig,
        stats: &mut IndexStats,
    ) -> Result<Eager, IndexError> {
        let table = LiveTable::new(automaton, config.max_states)?;
        let n = table.len();
        stats.states = n;
        stats.byte_classes = table.stride;
        let mut e = Eager {
            masks: (0..n).map(|_| OnceLock::new()).collect(),
            classes: Classes::new(&table.classes),
            budgets: Slots::new(n),
            max_budget: None,
            token_live: None,
            plain_level: Vec::new(),
            table,
        };
        e.max_budget = e.compute_budget(tries);
        e.plain_level = plain_reach(&e.table)
            .iter()
            .map(|&r| {
                trie::PLAIN_LEVELS
                    .iter()
                    .rposition(|&k| k <= r)
                    .map_or(NO_LEVEL, |l| l as u8)
            })
            .collect();
        stats.body_states = e.plain_level.iter().filter(|&&l| l != NO_LEVEL).count();
        if config.eager {
            e.build_eager(tries, vocab, config, stats)?;
        }
        e.enforce_token_liveness(tries, vocab)?;
        Ok(e)
    }

    /// The mask of `s`, computed on first use (lazy masks) or at build.
    fn mask(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> &TokenSet {
        self.masks[s as usize].get_or_init(|| Arc::new(self.compute_mask(s, tries, vocab)))
    }

    fn eos_into(&self, s: u32, set: &mut TokenSet, vocab: &Vocabulary) {
        if self.table.accepting[s as usize] {
            for &e in vocab.eos() {
                set.insert(e);
            }
        }
    }

    /// One walk of the full trie from `s` (lazy mode and the reference).
    fn compute_mask(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> TokenSet {
        let mut set;
        let level = self.plain_level[s as usize];
        if level != NO_LEVEL {
            let level = tries.plain_level(level as usize);
            set = level.set.clone();
            walk_into(&level.rest, &self.table, s, &mut set);
        } else {
            set = TokenSet::new(vocab.logits_width());
            walk_into(&tries.full, &self.table, s, &mut set);
        }
        self.eos_into(s, &mut set, vocab);
        set
    }

    /// With every single byte in the vocabulary, a byte-live state is also
    /// live at the token level (spell the completion byte by byte). Without,
    /// a state may allow tokens yet never reach acceptance in tokens (`a*b`
    /// over a vocabulary without `b`): compute token-level liveness over the
    /// explicit token graph, drop tokens into token-dead states from every
    /// mask, and refuse the build when the start is token-dead or a
    /// token-live state is left with nothing. Costs states × allowed tokens;
    /// only vocabularies missing single bytes (small, custom ones) pay it.
    fn enforce_token_liveness(
        &mut self,
        tries: &VocabTries,
        vocab: &Vocabulary,
    ) -> Result<(), IndexError> {
        if tries.every_byte {
            return Ok(());
        }
        let n = self.table.len();
        let masks: Vec<TokenSet> = (0..n as u32)
            .map(|s| self.mask(s, tries, vocab).clone())
            .collect();
        let succ: Vec<Vec<(TokenId, u32)>> = (0..n)
            .map(|s| {
                masks[s]
                    .iter()
                    .filter(|&t| !vocab.is_eos(t))
                    .filter_map(|t| {
                        let b = vocab.spelling(t)?;
                        let x = self.table.walk(s as u32, b);
                        (x != DEAD).then_some((t, x))
                    })
                    .collect()
            })
            .collect();
        let mut live: Vec<bool> = self.table.accepting.clone();
        loop {
            let mut changed = false;
            for s in 0..n {
                if !live[s] && succ[s].iter().any(|&(_, x)| live[x as usize]) {
                    live[s] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if !live[self.table.start as usize] {
            return Err(self.incompatible(self.table.start));
        }
        let cells: Vec<OnceLock<Arc<TokenSet>>> = (0..n).map(|_| OnceLock::new()).collect();
        for s in 0..n {
            let mut m = masks[s].clone();
            for &(t, x) in &succ[s] {
                if !live[x as usize] {
                    m.remove(t);
                }
            }
            if live[s] && m.is_empty() {
                return Err(self.incompatible(s as u32));
            }
            let _ = cells[s].set(Arc::new(m));
        }
        self.masks = cells;
        self.token_live = Some(live);
        Ok(())
    }

    fn incompatible(&self, s: u32) -> IndexError {
        IndexError::IncompatibleVocabulary {
            prefix: String::from_utf8_lossy(&self.example_prefix(s)).into_owned(),
        }
    }

    /// Some text leading from the start to `s` (BFS over byte classes).
    fn example_prefix(&self, target: u32) -> Vec<u8> {
        let n = self.table.len();
        let mut parent: Vec<Option<(u32, u8)>> = vec![None; n];
        let mut seen = vec![false; n];
        let mut queue = std::collections::VecDeque::from([self.table.start]);
        seen[self.table.start as usize] = true;
        while let Some(s) = queue.pop_front() {
            if s == target {
                break;
            }
            for &b in &self.table.reps {
                let t = self.table.next(s, b);
                if t != DEAD && !seen[t as usize] {
                    seen[t as usize] = true;
                    parent[t as usize] = Some((s, b));
                    queue.push_back(t);
                }
            }
        }
        let mut out = Vec::new();
        let mut s = target;
        while let Some((p, b)) = parent[s as usize] {
            out.push(b);
            s = p;
        }
        out.reverse();
        out
    }

    /// Every state's budget ([`backend::budget`]), in order of distance
    /// to acceptance (so each is one step from a known one); the largest.
    fn compute_budget(&self, tries: &VocabTries) -> Option<u32> {
        let t = &self.table;
        let mut order: Vec<u32> = (0..t.len() as u32).collect();
        order.sort_unstable_by_key(|&s| t.dist[s as usize]);
        order
            .into_iter()
            .map(|s| backend::budget(self, tries, s))
            .filter(|&b| b != u32::MAX)
            .max()
    }

    /// Every mask at build time. A state's mask is the union of: its plain
    /// level's precomputed set (string-body states), one walk of the tokens
    /// of at most `horizon` bytes shared by its bounded-horizon class (and
    /// plain level), and a walk of the longer tokens from the state itself.
    fn build_eager(
        &mut self,
        tries: &VocabTries,
        vocab: &Vocabulary,
        config: &IndexConfig,
        stats: &mut IndexStats,
    ) -> Result<(), IndexError> {
        let n = self.table.len();
        let width = vocab.logits_width();
        let level = &self.plain_level;
        let rounds = tries.horizon.min(tries.short.max_depth);
        let (class_of, _) = horizon_classes(&self.table, rounds);
        // One short walk per (class, plain level) pair.
        let mut walk_of_key: FastMap<(u32, u8), u32> = FastMap::default();
        let mut walks: Vec<(u32, u8)> = Vec::new(); // (representative, level)
        let walk_of: Vec<u32> = (0..n)
            .map(|s| {
                let key = (class_of[s], level[s]);
                *walk_of_key.entry(key).or_insert_with(|| {
                    walks.push((s as u32, level[s]));
                    walks.len() as u32 - 1
                })
            })
            .collect();
        stats.horizon_classes = walks.len();
        let table = &self.table;
        let long_trie = |l: u8| {
            if l == NO_LEVEL {
                &tries.long
            } else {
                &tries.plain_level(l as usize).rest_long
            }
        };
        let expired = std::sync::atomic::AtomicBool::new(false);
        let past_deadline = || {
            if let Some(d) = config.deadline {
                if Instant::now() > d {
                    expired.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            expired.load(std::sync::atomic::Ordering::Relaxed)
        };
        // Short walks are lists of ids (most are a handful of tokens; a
        // 19 KB bitset per walk was most of their cost), in the trie's
        // byte-lexicographic order, so equal sets are equal lists; a walk
        // whose list would outgrow a bitset becomes one.
        let mut short_lists: Vec<Walked> = Vec::new();
        let mut short_fps: Vec<u64> = Vec::new();
        let mut long_lists: Vec<Vec<u32>> = Vec::new();
        // A small automaton is walked by one worker: waking every worker of
        // the global pool (or starting it) costs more than its few walks.
        let threads = if n <= SEQUENTIAL_STATES {
            1
        } else {
            config.threads
        };
        run_with_threads(threads, &mut || {
            (short_lists, short_fps) =
                short_walks(table, &class_of, &walks, tries, width, &past_deadline);
            // Liveness of the first `rounds` bytes is the same across a class:
            // when no long token survives that far from the representative,
            // none does from any state of the class, and the per-state walk
            // is skipped.
            let deep: Vec<bool> = walks
                .par_iter()
                .map(|&(s, l)| long_trie(l).reaches_depth(s, rounds, |s, b| table.next(s, b)))
                .collect();
            long_lists = (0..n as u32)
                .into_par_iter()
                .map(|s| {
                    let mut v = Vec::new();
                    if !deep[walk_of[s as usize] as usize] || (s % 64 == 0 && past_deadline()) {
                        return v;
                    }
                    long_trie(level[s as usize]).walk(s, |s, b| table.next(s, b), |t| v.push(t));
                    v
                })
                .collect();
        })?;
        if past_deadline() {
            return Err(IndexError::Deadline);
        }
        // Walks with equal results share one id, so that states differing
        // only in their class compose one mask.
        // (Keyed by fingerprint, confirmed by content: a collision only
        // costs a missed merge.)
        let mut short_ids: FastMap<u64, u32> = FastMap::default();
        let short_id: Vec<u32> = (0..short_lists.len())
            .map(|w| {
                let first = *short_ids.entry(short_fps[w]).or_insert(w as u32);
                if short_lists[first as usize] == short_lists[w] {
                    first
                } else {
                    w as u32
                }
            })
            .collect();
        // Compose per state and deduplicate. A mask's fingerprint is the sum
        // of `mix` over its ids, kept up to date as ids are added, so the
        // 19 KB sets are only compared, never hashed; a fingerprint hit is
        // confirmed by content (a collision only costs a missed merge).
        let mut by_key: FastMap<(u32, u8, bool, &[u32]), Arc<TokenSet>> = FastMap::default();
        let mut by_fp: FastMap<u64, Arc<TokenSet>> = FastMap::default();
        let mut distinct = 0usize;
        let mut memory = 0usize;
        for s in 0..n {
            let w = walk_of[s];
            let key = (
                short_id[w as usize],
                level[s],
                table.accepting[s],
                long_lists[s].as_slice(),
            );
            let mask = match by_key.get(&key) {
                Some(m) => m.clone(),
                None => {
                    let (mut set, mut fp) = if level[s] != NO_LEVEL {
                        let pl = tries.plain_level(level[s] as usize);
                        (pl.set.clone(), pl.fingerprint)
                    } else {
                        (TokenSet::new(width), 0)
                    };
                    // A plain level's set and its `rest` tries' tokens are
                    // disjoint, so the walk's fingerprint adds exactly.
                    short_lists[w as usize].add_to(&mut set);
                    fp = fp.wrapping_add(short_fps[w as usize]);
                    let mut add = |set: &mut TokenSet, t: u32| {
                        if set.insert_new(TokenId(t)) {
                            fp = fp.wrapping_add(mix(t));
                        }
                    };
                    for &t in &long_lists[s] {
                        add(&mut set, t);
                    }
                    for &(f, d) in &tries.full.dups {
                        if set.contains(TokenId(f)) {
                            add(&mut set, d);
                        }
                    }
                    if table.accepting[s] {
                        for &e in vocab.eos() {
                            add(&mut set, e.0);
                        }
                    }
                    let shared = by_fp.get(&fp).filter(|a| ***a == set).cloned();
                    let arc = match shared {
                        Some(a) => a,
                        None => {
                            memory += set.memory_usage();
                            if memory > config.max_mask_memory {
                                return Err(IndexError::TooMuchMemory {
                                    limit: config.max_mask_memory,
                                });
                            }
                            distinct += 1;
                            let a = Arc::new(set);
                            by_fp.entry(fp).or_insert_with(|| a.clone());
                            a
                        }
                    };
                    by_key.insert(key, arc.clone());
                    arc
                }
            };
            let _ = self.masks[s].set(mask);
        }
        stats.distinct_masks = distinct;
        Ok(())
    }
}

impl Backend for Eager {
    fn start(&self) -> u32 {
        self.table.start
    }

    fn num_states(&self) -> usize {
        self.table.len()
    }

    fn is_accepting(&self, s: u32) -> bool {
        self.table.accepting[s as usize]
    }

    fn allowed(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<&TokenSet> {
        Some(self.mask(s, tries, vocab))
    }

    #[inline]
    fn walk(&self, s: u32, bytes: &[u8]) -> u32 {
        let n = self.table.walk(s, bytes);
        match &self.token_live {
            Some(live) if n != DEAD && !live[n as usize] => DEAD,
            _ => n,
        }
    }

    fn next_byte(&self, s: u32, b: u8) -> u32 {
        self.table.next(s, b)
    }

    fn classes(&self) -> &Classes {
        &self.classes
    }

    fn budgets(&self) -> &Slots {
        &self.budgets
    }

    fn max_budget(&self) -> Option<u32> {
        self.max_budget
    }

    fn dist(&self, s: u32) -> u32 {
        self.table.dist[s as usize]
    }

    fn memory_usage(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        let mut m = self.table.memory_usage() + self.budgets.memory_usage() + self.masks.len() * 8;
        for cell in &self.masks {
            if let Some(a) = cell.get() {
                if seen.insert(Arc::as_ptr(a)) {
                    m += a.memory_usage();
                }
            }
        }
        m
    }

    fn table(&self) -> Option<&LiveTable> {
        Some(&self.table)
    }

    fn is_token_pruned(&self) -> bool {
        self.token_live.is_some()
    }
}

/// Most automaton states walked on the calling thread alone.
const SEQUENTIAL_STATES: usize = 8;

/// Runs `f` on `threads` workers: 1 is the calling thread only (rayon's
/// parallel iterators inside `f` then run sequentially on a one-thread
/// pool), 0 the global pool (all cores).
fn run_with_threads(threads: usize, f: &mut (dyn FnMut() + Send)) -> Result<(), IndexError> {
    if threads == 0 {
        f();
        return Ok(());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(IndexError::Threads)?;
    pool.install(f);
    Ok(())
}

/// Adds to `set` the tokens of `trie` (and their duplicates) that keep `s`
/// live (lazy mode and the reference walk).
fn walk_into(trie: &TokenTrie, table: &LiveTable, s: u32, set: &mut TokenSet) {
    trie.walk(s, |s, b| table.next(s, b), |t| set.insert(TokenId(t)));
    for &(first, dup) in &trie.dups {
        if set.contains(TokenId(first)) {
            set.insert(TokenId(dup));
        }
    }
}

/// Partition refinement for `h` rounds: states in one class agree on
/// liveness for every string of at most `h` bytes. Returns the class of each
/// state and the number of classes.
fn horizon_classes(t: &LiveTable, h: usize) -> (Vec<u32>, usize) {
    let n = t.len();
    // The live transitions of each state, (class, target) in class order: most
    // states have a few among dozens of classes, so signatures are built
    // from these rather than from full rows.
    let mut off: Vec<u32> = Vec::with_capacity(n + 1);
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for s in 0..n {
        off.push(edges.len() as u32);
        let row = &t.trans[s * t.stride..(s + 1) * t.stride];
        for (c, &x) in row.iter().enumerate() {
            if x != DEAD {
                edges.push((c as u32, x));
            }
        }
    }
    off.push(edges.len() as u32);
    let out = |s: usize| &edges[off[s] as usize..off[s + 1] as usize];
    let mut class = vec![0u32; n];
    let mut next = vec![0u32; n];
    let mut count = 1usize;
    for _ in 0..h {
        // A state's signature is its class and the classes its live
        // transitions lead to; states are looked up by the signature's hash
        // and confirmed against the class's first state (an unequal state
        // with an equal hash goes to an exact map).
        let same = |a: usize, b: usize, class: &[u32]| {
            class[a] == class[b]
                && out(a).len() == out(b).len()
                && out(a)
                    .iter()
                    .zip(out(b))
                    .all(|(x, y)| x.0 == y.0 && class[x.1 as usize] == class[y.1 as usize])
        };
        let mut by_hash: FastMap<u64, u32> = FastMap::default();
        by_hash.reserve(count * 2);
        let mut exact: FastMap<Vec<u32>, u32> = FastMap::default();
        let mut reps: Vec<u32> = Vec::new();
        for s in 0..n {
            let mut hash = (class[s] as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for &(c, x) in out(s) {
                hash = (hash.rotate_left(26) ^ ((c as u64) << 32 | class[x as usize] as u64))
                    .wrapping_mul(0xD6E8_FEB8_6659_FD93);
            }
            let id = reps.len() as u32;
            let first = *by_hash.entry(hash).or_insert(id);
            next[s] = if first == id {
                reps.push(s as u32);
                id
            } else if same(reps[first as usize] as usize, s, &class) {
                first
            } else {
                let mut sig = vec![class[s]];
                for &(c, x) in out(s) {
                    sig.extend([c, class[x as usize]]);
                }
                let id = reps.len() as u32;
                let e = *exact.entry(sig).or_insert(id);
                if e == id {
                    reps.push(s as u32);
                }
                e
            };
        }
        let new_count = reps.len();
        std::mem::swap(&mut class, &mut next);
        if new_count == count {
            break;
        }
        count = new_count;
    }
    (class, count)
}

fn plain_reach(t: &LiveTable) -> Vec<u32> {
    let n = t.len();
    let reps = PlainReps::new(&t.classes);
    // Plain successors of each state (one character), or not a candidate.
    let mut ok = vec![true; n];
    let mut succ_start = vec![0u32; n + 1];
    let mut succ: Vec<u32> = Vec::new();
    let mut cur: Vec<u32> = Vec::new();
    let mut next: Vec<u32> = Vec::new();
    for s in 0..n as u32 {
        let first = succ.len();
        if !plain_successors(
            |q, b| t.next(q, b),
            s,
            &reps,
            &mut cur,
            &mut next,
            &mut succ,
        ) {
            ok[s as usize] = false;
            succ.truncate(first);
            succ_start[s as usize + 1] = succ.len() as u32;
            continue;
        }
        succ[first..].sort_unstable();
        let mut w = first;
        for r in first..succ.len() {
            if r == first || succ[r] != succ[w - 1] {
                succ[w] = succ[r];
                w += 1;
            }
        }
        succ.truncate(w);
        succ_start[s as usize + 1] = succ.len() as u32;
    }
    // r = 0 where some plain character dies; otherwise 1 + the least r of
    // the plain successors: a search backwards from the r = 0 states.
    let seeds: Vec<u32> = (0..n as u32).filter(|&s| !ok[s as usize]).collect();
    reverse_reach(n, &seeds, &succ_start, &succ)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The straightforward refinement (full rows as signatures) that
    /// `horizon_classes` must agree with.
    fn horizon_classes_dense(t: &LiveTable, h: usize) -> Vec<u32> {
        let n = t.len();
        let mut class = vec![0u32; n];
        for _ in 0..h {
            let mut map: HashMap<Vec<u32>, u32> = HashMap::new();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let mut sig = vec![class[s]];
                    sig.extend((0..t.stride).map(|c| {
                        let x = t.trans[s * t.stride + c];
                        if x == DEAD {
                            u32::MAX
                        } else {
                            class[x as usize]
                        }
                    }));
                    let id = map.len() as u32;
                    *map.entry(sig).or_insert(id)
                })
                .collect();
            class = next;
        }
        class
    }

    fn same_partition(a: &[u32], b: &[u32]) -> bool {
        let mut ab: HashMap<u32, u32> = HashMap::new();
        let mut ba: HashMap<u32, u32> = HashMap::new();
        a.iter()
            .zip(b)
            .all(|(&x, &y)| *ab.entry(x).or_insert(y) == y && *ba.entry(y).or_insert(x) == x)
    }

    #[test]
    fn sparse_horizon_refinement_matches_the_dense_one() {
        for pattern in [
            r#"\{"name": "[a-z]{1,12}", "kind": (?:"alpha"|"beta"|"gamma")(?:, "n": -?[0-9]+)?\}"#,
            r#"\[(?:"(?:[^"\\]|\\.)*"(?:, ?"(?:[^"\\]|\\.)*"){0,3})?\]"#,
            r"(?:ab|cd|abcdx){1,6}[0-9]{0,20}",
            "",
        ] {
            let dfa = crate::dfa::ByteDfa::new(pattern, &Default::default()).unwrap();
            let t = LiveTable::new(&dfa, 1 << 20).unwrap();
            for h in [0, 1, 3, 16] {
                let (sparse, count) = horizon_classes(&t, h);
                let dense = horizon_classes_dense(&t, h);
                assert!(same_partition(&sparse, &dense), "{pattern} h={h}");
                let distinct: std::collections::HashSet<_> = sparse.iter().collect();
                assert_eq!(distinct.len(), count, "{pattern} h={h}");
            }
        }
    }
}

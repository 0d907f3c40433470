//! # Token tries: the vocabulary as the index engines walk it
//!
//! A vocabulary owns its tries ([`VocabTries`]: built on first use, cached
//! in the [`Vocabulary`] and shared by every index over it), as a tokenizer
//! owns its trie in llguidance's `toktrie`. The index engines (eager, lazy,
//! pushdown) walk them from their states with a step function that returns
//! [`DEAD`] for a dead transition.
//!
//! A token trie is stored as flat arrays in depth-first order, so a walk is a
//! forward scan and skipping a subtree is one jump (`end[i]`).
//!
//! Node `i` holds the byte on the edge into it, its depth (1 for a child of
//! the implicit root) and `end[i]`, the index just past its subtree. `token[i]`
//! is the token whose bytes end at the node (`NONE` if none); tokens with the
//! same bytes as an earlier one are listed in `dups`.

use super::{mix, TokenId, TokenSet, Vocabulary};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) const NONE: u32 = u32::MAX;

/// What a walk's step function returns for a dead transition (the text can
/// no longer be completed). The index's automata use the same value for "no
/// state" (`index::DEAD` is this constant).
pub(crate) const DEAD: u32 = u32::MAX;

#[derive(Clone, Debug, Default)]
pub(crate) struct TokenTrie {
    pub byte: Vec<u8>,
    pub depth: Vec<u16>,
    pub end: Vec<u32>,
    pub token: Vec<u32>,
    /// (first token, duplicate token) pairs with identical bytes.
    pub dups: Vec<(u32, u32)>,
    pub max_depth: usize,
    /// The depth-1 node of each first byte (`NONE` when absent).
    pub root: Vec<u32>,
    /// The depth-2 node of each pair of first bytes (`b1 * 256 + b2`,
    /// `NONE` when absent), built on the first [`TokenTrie::walk_live_roots`]
    /// (256 KB).
    second: std::sync::OnceLock<Box<[u32]>>,
}

/// The tries the index walks, built once per vocabulary. `full`, `short`
/// and `long` are built up front (every index needs them: budgets walk
/// `full`); each plain level and the string-body / chain tries are built on
/// first use ([`VocabTries::plain_level`], [`VocabTries::body`]), so a process
/// that compiles one small regex does not pay for what only string bodies
/// and lazy indexes walk.
#[derive(Debug)]
pub(crate) struct VocabTries {
    /// Every text token.
    pub full: TokenTrie,
    /// Tokens of at most `horizon` bytes.
    pub short: TokenTrie,
    /// Tokens longer than `horizon` bytes.
    pub long: TokenTrie,
    pub horizon: usize,
    /// Whether every single byte is a text token (then byte-live states are
    /// token-live): read on every compile, so computed once here rather than
    /// by a scan of the whole vocabulary each time.
    pub every_byte: bool,
    /// The logits width (the size of every set here).
    width: usize,
    /// Every text token's bytes, concatenated in sorted order, and per token
    /// `(start, end, id)` into them: what the lazily built parts read.
    bytes: Vec<u8>,
    sorted: Vec<(u32, u32, u32)>,
    /// Plain-token levels, one per entry of [`PLAIN_LEVELS`]. See [`PlainLevel`].
    plain_levels: Vec<std::sync::OnceLock<PlainLevel>>,
    body: std::sync::OnceLock<BodyTries>,
    /// The byte-chain tries built so far, by their byte set (at most
    /// [`BYTE_CHAINS_CACHED`]): shared by every index over the vocabulary,
    /// since one costs tens of milliseconds and schemas repeat their classes.
    byte_chains: std::sync::Mutex<ByteChainCache>,
    /// Caches other modules keep per vocabulary, by key (the pushdown
    /// engine's masks of the shared "any JSON value" fragment).
    pub shared: SharedCaches,
}

/// Per-vocabulary caches of other modules, by key, built once and shared
/// by every index over the vocabulary.
#[derive(Default)]
pub(crate) struct SharedCaches(
    pub std::sync::Mutex<HashMap<String, Arc<dyn std::any::Any + Send + Sync>>>,
);

impl std::fmt::Debug for SharedCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedCaches")
    }
}

/// The byte-chain tries kept ([`VocabTries::byte_chain`]), each with when it
/// was last asked for.
#[derive(Debug, Default)]
pub(crate) struct ByteChainCache {
    map: HashMap<u128, (Arc<ByteChainTokens>, u64)>,
    tick: u64,
}

/// Most leading bytes of the chain's set a [`ByteChainTokens`] key counts.
pub(crate) const BYTE_CHAIN_CAP: usize = 16;
/// Most byte-chain tries kept per vocabulary (each about 10 MB).
pub(crate) const BYTE_CHAINS_CACHED: usize = 16;

/// The tokens seen through one set `A` of ASCII bytes (a pattern's class,
/// such as `[0-9a-zA-Z_-]`), for a lazy index's states where every byte of
/// `A` leads to one and the same next state, and so on along a chain (a
/// counted class: one state per byte). A token's first `k` bytes in `A` then
/// lead to the chain's `k`-th state whatever they are.
#[derive(Debug)]
pub(crate) struct ByteChainTokens {
    /// `sets[j]`: the tokens made of 1 to `j` bytes, all in `A`, with the
    /// set's fingerprint.
    pub sets: Vec<(TokenSet, u64)>,
    /// Every other token that starts with a byte in `A`, keyed by one byte
    /// holding how many bytes in `A` it starts with (1 to
    /// [`BYTE_CHAIN_CAP`]), then the bytes after them. The tokens whose
    /// first byte is outside `A` are read from the vocabulary's full trie
    /// ([`TokenTrie::walk_live_roots_except`]): for a set such as the digits
    /// they are nearly the whole vocabulary, and copying them into this trie
    /// was most of the tens of milliseconds a new set cost in a mask step.
    pub trie: TokenTrie,
}

/// The tries of string bodies and chains (lazy indexes), built on first use.
#[derive(Debug)]
pub(crate) struct BodyTries {
    /// Every token that is not plain and whose bytes after its longest
    /// prefix of plain characters start with an ASCII byte, keyed by those
    /// bytes (the prefix removed; tokens with equal suffixes are `dups`). In
    /// a state that every plain character leads back to, a token's fate is
    /// its suffix's, so this trie replaces the walk of the last level's
    /// `rest` (thousands of plain prefixes) there.
    pub body_suffixes: TokenTrie,
    /// The tokens that end inside a character: plain characters, then the
    /// first bytes of a valid UTF-8 sequence (with the set's fingerprint). In
    /// a state that every plain character leads back to, they are all live
    /// (each can be completed to a plain character), and every other suffix
    /// starting at or above 0x80 is dead (patterns match valid UTF-8 only),
    /// so they need no walk through each state's own mid-character states.
    pub body_partial: (TokenSet, u64),
    /// The tokens of `body_partial` whose plain prefix is shorter than
    /// `PLAIN_LEVELS[CHAIN_LEVEL]` characters: live from a chain state live
    /// that far (they are not in `chain_suffixes`).
    pub chain_partial: (TokenSet, u64),
    /// Every token that is not plain (but those of `chain_partial`), or is
    /// plain with more than `PLAIN_LEVELS[CHAIN_LEVEL]` characters, keyed by one byte holding the
    /// number `k` of whole plain characters it starts with (at most that
    /// level), then the bytes after them. In a state where every plain
    /// character leads to one and the same next state, and so on along a
    /// chain (a counted string's body, where the state counts characters),
    /// `k` plain characters lead to the `k`-th state of the chain whatever
    /// they are, so a walk of this trie from the chain replaces the walk of
    /// thousands of plain prefixes.
    pub chain_suffixes: TokenTrie,
    /// Per node of the last plain level's `rest` trie: whether the node's
    /// bytes are whole plain characters (a walk that is in a state every
    /// plain character leads back to, there, can stop: see `lazy/mod.rs`).
    pub body_rest_boundary: Vec<bool>,
}

/// Length of the longest prefix of `b` made of complete plain characters.
pub(crate) fn plain_prefix_len(b: &[u8]) -> usize {
    let mut i = 0;
    while i < b.len() {
        let n = match b[i] {
            // ASCII: plain unless a control, `"`, `\\` or DEL.
            0x00..=0x7F if plain_ascii(b[i]) => {
                i += 1;
                continue;
            }
            0x00..=0x7F => return i,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return i,
        };
        if i + n > b.len() || !is_plain(&b[i..i + n]) {
            return i;
        }
        i += n;
    }
    i
}

/// The "plain string content" tokens of at most `PLAIN_LEVELS[i]` characters (every
/// byte printable ASCII other than `"` and `\\`, or part of a complete UTF-8
/// character ≥ U+0080 inside the token), and a trie of every other token. In
/// a state from which every plain text of that many characters stays live,
/// the mask is `set` plus a walk of `rest`.
#[derive(Debug)]
pub(crate) struct PlainLevel {
    pub set: TokenSet,
    /// `set`'s fingerprint (the sum of [`mix`] over its ids).
    pub fingerprint: u64,
    pub rest: TokenTrie,
    /// The tokens of `rest` of at most `horizon` bytes (walked once per
    /// bounded-horizon class) and the longer ones (walked per state).
    pub rest_short: TokenTrie,
    pub rest_long: TokenTrie,
}

/// The character limits of the plain levels (`u32::MAX`: no limit).
pub(crate) const PLAIN_LEVELS: [u32; 6] = [2, 4, 8, 16, 32, u32::MAX];

/// The plain level whose set a chain walk starts from (the last finite one):
/// its plain tokens are allowed where the chain is live that far.
pub(crate) const CHAIN_LEVEL: usize = PLAIN_LEVELS.len() - 2;

/// Number of characters of a plain token (None when not plain): one
/// UTF-8 check, one pass.
pub(crate) fn plain_chars(b: &[u8]) -> Option<u32> {
    if b.iter().all(|&x| plain_ascii(x)) {
        return Some(b.len() as u32);
    }
    let s = std::str::from_utf8(b).ok()?;
    let mut n = 0u32;
    for c in s.chars() {
        if c < '\u{80}' && !plain_ascii(c as u8) {
            return None;
        }
        n += 1;
    }
    Some(n)
}

/// A printable ASCII byte other than `"` and `\\`.
#[inline]
fn plain_ascii(x: u8) -> bool {
    (b' '..=b'~').contains(&x) && x != b'"' && x != b'\\'
}

/// Whether `b` is plain string content: complete UTF-8 characters that are
/// printable ASCII other than `"` and `\\`, or at or above U+0080.
pub(crate) fn is_plain(b: &[u8]) -> bool {
    plain_chars(b).is_some()
}

impl VocabTries {
    pub fn new(vocab: &Vocabulary, horizon: usize) -> VocabTries {
        let mut toks: Vec<(&[u8], u32)> = vocab
            .spellings()
            .filter(|(_, b)| !b.is_empty())
            .map(|(id, b)| (b, id.0))
            .collect();
        toks.sort_unstable();
        let full = TokenTrie::from_sorted(toks.iter().copied());
        let short = TokenTrie::from_sorted(toks.iter().copied().filter(|t| t.0.len() <= horizon));
        let long = TokenTrie::from_sorted(toks.iter().copied().filter(|t| t.0.len() > horizon));
        let mut bytes = Vec::with_capacity(toks.iter().map(|t| t.0.len()).sum());
        let sorted = toks
            .iter()
            .map(|&(b, id)| {
                let start = bytes.len() as u32;
                bytes.extend_from_slice(b);
                (start, bytes.len() as u32, id)
            })
            .collect();
        // Bytes no UTF-8 text holds need no token (0xC0 and 0xC1 are the
        // spellings' own, see `vocab`).
        let every_byte = (0..=255u8)
            .filter(|b| !matches!(b, 0xC0 | 0xC1 | 0xF5..=0xFF))
            .all(|b| full.child(None, b).is_some_and(|n| full.token[n] != NONE));
        VocabTries {
            every_byte,
            full,
            short,
            long,
            horizon,
            width: vocab.logits_width(),
            bytes,
            sorted,
            plain_levels: PLAIN_LEVELS.iter().map(|_| Default::default()).collect(),
            body: Default::default(),
            byte_chains: Default::default(),
            shared: Default::default(),
        }
    }

    /// The same tries for another logits width: the tries themselves do not
    /// depend on it; the lazily built parts (sets of that width) start empty.
    pub fn with_width(self, width: usize) -> VocabTries {
        if width == self.width {
            return self;
        }
        VocabTries {
            width,
            plain_levels: PLAIN_LEVELS.iter().map(|_| Default::default()).collect(),
            body: Default::default(),
            byte_chains: Default::default(),
            shared: Default::default(),
            ..self
        }
    }

    /// Writes the tries built up front to a cache payload (the lazily built
    /// parts are not cached).
    pub(crate) fn encode(&self, e: &mut super::codec::Enc) {
        e.u64(self.horizon as u64);
        e.u64(self.width as u64);
        e.u8(self.every_byte as u8);
        e.bytes(&self.bytes);
        e.u32s(self.sorted.iter().flat_map(|&(a, b, id)| [a, b, id]));
        for t in [&self.full, &self.short, &self.long] {
            t.encode(e);
        }
    }

    /// Reads what [`VocabTries::encode`] wrote for `vocab`, checking every
    /// index the walks follow.
    pub(crate) fn decode(
        d: &mut super::codec::Dec<'_>,
        vocab: &Vocabulary,
    ) -> Result<VocabTries, String> {
        let horizon = d.usize()?;
        let width = d.usize()?;
        let every_byte = d.u8()? != 0;
        let bytes = d.bytes()?.to_vec();
        let flat = d.u32s()?;
        if flat.len() % 3 != 0 {
            return Err("bad sorted tokens".into());
        }
        let n_ids = vocab.num_ids();
        let sorted: Vec<(u32, u32, u32)> =
            flat.chunks_exact(3).map(|c| (c[0], c[1], c[2])).collect();
        if sorted
            .iter()
            .any(|&(a, b, id)| a > b || b as usize > bytes.len() || id as usize >= n_ids)
        {
            return Err("sorted token out of range".into());
        }
        let full = TokenTrie::decode(d, n_ids)?;
        let short = TokenTrie::decode(d, n_ids)?;
        let long = TokenTrie::decode(d, n_ids)?;
        if horizon != crate::index::IndexConfig::default().horizon || width != vocab.logits_width()
        {
            return Err("tries built for another horizon or width".into());
        }
        Ok(VocabTries {
            every_byte,
            full,
            short,
            long,
            horizon,
            width,
            bytes,
            sorted,
            plain_levels: PLAIN_LEVELS.iter().map(|_| Default::default()).collect(),
            body: Default::default(),
            byte_chains: Default::default(),
            shared: Default::default(),
        })
    }

    /// The byte-chain tries of the ASCII byte set `set` (bit `b` for byte
    /// `b`), built on first use and shared. At most [`BYTE_CHAINS_CACHED`]
    /// are kept: a new set evicts the one used least recently (an index that
    /// holds an evicted one keeps it). Refusing sets past the cap instead
    /// (the first ones built staying) left a process that had met 16 sets to
    /// walk the states of every other one the slow way: over the MaskBench
    /// dev half, 11,176 such walks over 104 sets, 7,135 of them for the hex
    /// digits of UUIDs.
    /// Whether the byte-chain tries of `set` are built (a peek: the set's
    /// last use is not updated).
    pub fn has_byte_chain(&self, set: u128) -> bool {
        let cache = self.byte_chains.lock().unwrap_or_else(|p| p.into_inner());
        cache.map.contains_key(&set)
    }

    pub fn byte_chain(&self, set: u128) -> Option<Arc<ByteChainTokens>> {
        let lock = || self.byte_chains.lock().unwrap_or_else(|p| p.into_inner());
        {
            let mut cache = lock();
            cache.tick += 1;
            let tick = cache.tick;
            if let Some((c, used)) = cache.map.get_mut(&set) {
                *used = tick;
                return Some(c.clone());
            }
        }
        // Built without the lock (two threads may both build one; the first
        // insert wins).
        let built = Arc::new(self.build_byte_chain(set));
        let mut cache = lock();
        let tick = cache.tick;
        if let Some((c, _)) = cache.map.get(&set) {
            return Some(c.clone());
        }
        if cache.map.len() >= BYTE_CHAINS_CACHED {
            let oldest = cache.map.iter().min_by_key(|(_, (_, used))| *used);
            if let Some((&old, _)) = oldest {
                cache.map.remove(&old);
            }
        }
        cache.map.insert(set, (built.clone(), tick));
        Some(built)
    }

    fn build_byte_chain(&self, set: u128) -> ByteChainTokens {
        let in_set = |b: u8| b < 128 && (set >> b) & 1 == 1;
        let mut by_len: Vec<Vec<u32>> = vec![Vec::new(); BYTE_CHAIN_CAP + 1];
        // The other tokens by how many bytes in the set they start with (at
        // most the cap), each as its bytes after those and its id. `toks` is
        // in byte order, so a group whose first bytes are cut is sorted
        // again; the group of none keeps that order (by bytes, then id).
        let mut groups: Vec<Vec<(&[u8], u32)>> = vec![Vec::new(); BYTE_CHAIN_CAP + 1];
        for (b, id) in self.toks() {
            let k = b.iter().take_while(|&&x| in_set(x)).count();
            if k == 0 {
                // In the full trie (see `ByteChainTokens::trie`).
                continue;
            }
            if k == b.len() && k <= BYTE_CHAIN_CAP {
                by_len[k].push(id);
                continue;
            }
            let j = k.min(BYTE_CHAIN_CAP);
            groups[j].push((&b[j..], id));
        }
        for g in groups.iter_mut() {
            if !g.is_sorted() {
                g.sort_unstable();
            }
        }
        // Keys: the count as one byte, then the bytes after it, written
        // one after another in one buffer.
        let total: usize = groups.iter().flatten().map(|(b, _)| b.len() + 1).sum();
        let mut keys = Vec::with_capacity(total);
        let mut spans = Vec::with_capacity(groups.iter().map(Vec::len).sum());
        for (j, g) in groups.iter().enumerate() {
            for &(rest, id) in g {
                let a = keys.len();
                keys.push(j as u8);
                keys.extend_from_slice(rest);
                spans.push((a, keys.len(), id));
            }
        }
        let trie = TokenTrie::from_sorted(spans.iter().map(|&(a, b, id)| (&keys[a..b], id)));
        let mut cur = TokenSet::new(self.width);
        let mut fp = 0u64;
        let mut sets = Vec::with_capacity(BYTE_CHAIN_CAP + 1);
        for ids in &by_len {
            for &t in ids {
                if cur.insert_new(TokenId(t)) {
                    fp = fp.wrapping_add(mix(t));
                }
            }
            sets.push((cur.clone(), fp));
        }
        ByteChainTokens { sets, trie }
    }

    /// The text tokens in byte order.
    fn toks(&self) -> impl Iterator<Item = (&[u8], u32)> + Clone + '_ {
        self.sorted
            .iter()
            .map(|&(a, b, id)| (&self.bytes[a as usize..b as usize], id))
    }

    /// Plain level `l` (an index into [`PLAIN_LEVELS`]), built on first use.
    pub fn plain_level(&self, l: usize) -> &PlainLevel {
        self.plain_levels[l].get_or_init(|| {
            let max_chars = PLAIN_LEVELS[l];
            let horizon = self.horizon;
            let fits = |b: &[u8]| plain_chars(b).is_some_and(|c| c <= max_chars);
            let mut set = TokenSet::new(self.width);
            for (b, id) in self.toks() {
                if fits(b) {
                    set.insert(TokenId(id));
                }
            }
            let rest_toks = || self.toks().filter(|t| !fits(t.0));
            PlainLevel {
                fingerprint: set.iter().fold(0u64, |f, t| f.wrapping_add(mix(t.0))),
                set,
                rest: TokenTrie::from_sorted(rest_toks()),
                rest_short: TokenTrie::from_sorted(rest_toks().filter(|t| t.0.len() <= horizon)),
                rest_long: TokenTrie::from_sorted(rest_toks().filter(|t| t.0.len() > horizon)),
            }
        })
    }

    /// Builds now every part built on first use but the byte chains (whose
    /// sets depend on the patterns): each plain level, the string-body
    /// tries and the second-level tables of the tries walked from live
    /// roots.
    pub fn build_lazy_parts(&self) {
        self.full.second_table();
        for l in 0..PLAIN_LEVELS.len() {
            self.plain_level(l).rest.second_table();
        }
        self.body().body_suffixes.second_table();
    }

    /// The string-body and chain tries, built on first use.
    pub fn body(&self) -> &BodyTries {
        self.body.get_or_init(|| self.build_body())
    }

    fn build_body(&self) -> BodyTries {
        let toks: Vec<(&[u8], u32)> = self.toks().collect();
        let mut suffixes: Vec<(&[u8], u32)> = Vec::new();
        let mut partial = TokenSet::new(self.width);
        let mut partial_fp = 0u64;
        for &(b, id) in toks.iter().filter(|t| !is_plain(t.0)) {
            let suffix = &b[plain_prefix_len(b)..];
            if suffix[0] < 0x80 {
                suffixes.push((suffix, id));
            } else if std::str::from_utf8(suffix).is_err_and(|e| e.error_len().is_none()) {
                // (The plain prefix took every whole character: the suffix
                // is one character's first bytes.)
                if partial.insert_new(TokenId(id)) {
                    partial_fp = partial_fp.wrapping_add(mix(id));
                }
            }
        }
        suffixes.sort_unstable();
        // Keys of `chain_suffixes`: a prefix longer than the chain level is cut
        // there (its other plain characters are walked as bytes).
        let cap = PLAIN_LEVELS[CHAIN_LEVEL] as usize;
        let mut chain_partial = (TokenSet::new(self.width), 0u64);
        let chain_keys: Vec<(Vec<u8>, u32)> = toks
            .iter()
            .filter_map(|&(b, id)| {
                let n = plain_prefix_len(b);
                let prefix = std::str::from_utf8(&b[..n]).unwrap_or("");
                let chars = prefix.chars().count();
                if n < b.len() && b[n] >= 0x80 && chars < cap {
                    // Ends inside a character (see `body_partial`), after
                    // fewer plain characters than the chain is known live for.
                    if partial.contains(TokenId(id)) && chain_partial.0.insert_new(TokenId(id)) {
                        chain_partial.1 = chain_partial.1.wrapping_add(mix(id));
                    }
                    return None;
                }
                (n < b.len() || chars > cap).then(|| {
                    let k = chars.min(cap);
                    let cut = prefix.char_indices().nth(k).map_or(n, |(i, _)| i);
                    let mut key = vec![k as u8];
                    key.extend_from_slice(&b[cut..]);
                    (key, id)
                })
            })
            .collect();
        let chain_suffixes = {
            let mut keys = chain_keys;
            keys.sort_unstable();
            TokenTrie::from_sorted(keys.iter().map(|(k, id)| (k.as_slice(), *id)))
        };
        BodyTries {
            body_rest_boundary: self
                .plain_level(PLAIN_LEVELS.len() - 1)
                .rest
                .plain_boundaries(),
            body_suffixes: TokenTrie::from_sorted(suffixes.into_iter()),
            body_partial: (partial, partial_fp),
            chain_partial,
            chain_suffixes,
        }
    }
}

/// An automaton walked by [`TokenTrie::walk_live_roots`].
pub(crate) trait LiveBytes {
    /// The state after `b` in `s`, or `DEAD`.
    fn next(&mut self, s: u32, b: u8) -> u32;
    /// The bytes on which `s` is live (bit `b % 64` of word `b / 64`).
    fn live(&mut self, s: u32) -> [u64; 4];
}

/// The bytes of a 256-bit set, ascending.
#[inline]
fn byte_set_iter(set: [u64; 4]) -> impl Iterator<Item = u8> {
    set.into_iter().enumerate().flat_map(|(w, mut bits)| {
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                (w as u32 * 64 + b) as u8
            })
        })
    })
}

impl TokenTrie {
    /// Builds the trie from tokens sorted by bytes.
    pub(crate) fn from_sorted<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)>) -> TokenTrie {
        let mut t = TokenTrie::default();
        // open[d] = node index of the open node at depth d+1 on the current path.
        let mut open: Vec<u32> = Vec::new();
        let mut prev: &[u8] = &[];
        for (bytes, id) in tokens {
            let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            // Close nodes deeper than the common prefix.
            while open.len() > lcp {
                let n = open.pop().unwrap_or(0);
                t.end[n as usize] = t.byte.len() as u32;
            }
            for (d, &b) in bytes.iter().enumerate().skip(lcp) {
                open.push(t.byte.len() as u32);
                t.byte.push(b);
                t.depth.push(d as u16 + 1);
                t.end.push(0);
                t.token.push(NONE);
            }
            let last = open[bytes.len() - 1] as usize;
            if t.token[last] == NONE {
                t.token[last] = id;
            } else {
                t.dups.push((t.token[last], id));
            }
            t.max_depth = t.max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(n) = open.pop() {
            t.end[n as usize] = t.byte.len() as u32;
        }
        t.root = vec![NONE; 256];
        let mut j = 0;
        while j < t.len() {
            t.root[t.byte[j] as usize] = j as u32;
            j = t.end[j] as usize;
        }
        t
    }

    pub fn len(&self) -> usize {
        self.byte.len()
    }

    fn encode(&self, e: &mut super::codec::Enc) {
        e.bytes(&self.byte);
        e.u16s(&self.depth);
        e.u32s(self.end.iter().copied());
        e.u32s(self.token.iter().copied());
        e.u32s(self.dups.iter().flat_map(|&(a, b)| [a, b]));
        e.u64(self.max_depth as u64);
        e.u32s(self.root.iter().copied());
    }

    /// Reads a trie, checking that its arrays agree and every node, end and
    /// token index is in range (tokens below `n_ids`).
    fn decode(d: &mut super::codec::Dec<'_>, n_ids: usize) -> Result<TokenTrie, String> {
        let byte = d.bytes()?.to_vec();
        let depth = d.u16s()?;
        let end = d.u32s()?;
        let token = d.u32s()?;
        let flat = d.u32s()?;
        let max_depth = d.usize()?;
        let root = d.u32s()?;
        let n = byte.len();
        let ok_token = |t: u32| t == NONE || (t as usize) < n_ids;
        let ok = depth.len() == n
            && end.len() == n
            && token.len() == n
            && flat.len() % 2 == 0
            && root.len() == 256
            && end
                .iter()
                .enumerate()
                .all(|(i, &e)| e as usize > i && e as usize <= n)
            && depth.iter().all(|&x| x >= 1 && x as usize <= max_depth)
            && token.iter().all(|&t| ok_token(t))
            && flat.iter().all(|&t| t != NONE && ok_token(t))
            && root.iter().all(|&r| r == NONE || (r as usize) < n);
        if !ok {
            return Err("inconsistent token trie".into());
        }
        Ok(TokenTrie {
            byte,
            depth,
            end,
            token,
            dups: flat.chunks_exact(2).map(|c| (c[0], c[1])).collect(),
            max_depth,
            root,
            second: Default::default(),
        })
    }

    /// Per node, whether its bytes (the path from the root) are whole plain
    /// characters.
    pub fn plain_boundaries(&self) -> Vec<bool> {
        let mut path: Vec<u8> = Vec::with_capacity(self.max_depth);
        (0..self.len())
            .map(|i| {
                path.truncate(self.depth[i] as usize - 1);
                path.push(self.byte[i]);
                plain_prefix_len(&path) == path.len()
            })
            .collect()
    }

    /// Sorts and dedups `ids` (first ids of this trie's nodes) and adds
    /// the duplicate ids of the same bytes, keeping the list sorted.
    pub fn with_dups(&self, ids: &mut Vec<u32>) {
        ids.sort_unstable();
        ids.dedup();
        let dups: Vec<u32> = self
            .dups
            .iter()
            .filter(|(first, _)| ids.binary_search(first).is_ok())
            .map(|&(_, dup)| dup)
            .collect();
        if !dups.is_empty() {
            ids.extend(dups);
            ids.sort_unstable();
            ids.dedup();
        }
    }

    /// The child of `node` (or of the root when `None`) reached by `b`.
    pub fn child(&self, node: Option<usize>, b: u8) -> Option<usize> {
        let (mut j, stop) = match node {
            Some(i) => (i + 1, self.end[i] as usize),
            None => {
                let r = self.root.get(b as usize).copied().unwrap_or(NONE);
                return (r != NONE).then_some(r as usize);
            }
        };
        while j < stop {
            if self.byte[j] == b {
                return Some(j);
            }
            j = self.end[j] as usize;
        }
        None
    }

    /// [`TokenTrie::walk`] (without the count) that enters only the
    /// subtrees of the first two bytes live from `start`, found through
    /// `root` and the 64 K-entry `second` table. [`LiveBytes::live`] is the
    /// set of bytes on which a state is live, read off the automaton's row
    /// (a pass over its byte classes); [`LiveBytes::next`] steps as `walk`'s
    /// `next` does. `walk` jumps from each first byte's node to the
    /// next through `end`, a read of three arrays at places spread over the
    /// whole trie (cache misses, most of a first visit where few bytes may
    /// follow, as inside a literal); stepping the automaton on each of the
    /// 256 first bytes and each second byte the trie holds was the next
    /// largest share. Here the first two levels cost one `live` each and a
    /// lookup per live byte. The same tokens are hit, in the same order.
    #[inline]
    pub fn walk_live_roots(&self, start: u32, dfa: &mut impl LiveBytes, hit: impl FnMut(u32)) {
        self.walk_live_roots_except(start, dfa, [0; 4], hit);
    }

    /// The second level's nodes by their first two bytes (`NONE`: no such
    /// node), built on first use; empty without a root table.
    fn second_table(&self) -> &[u32] {
        if self.root.len() != 256 {
            return &[];
        }
        self.second.get_or_init(|| {
            let mut second = vec![NONE; 256 * 256].into_boxed_slice();
            for (b1, &r) in self.root.iter().enumerate() {
                if r == NONE {
                    continue;
                }
                let (mut j, n) = (r as usize + 1, self.end[r as usize] as usize);
                while j < n {
                    second[b1 * 256 + self.byte[j] as usize] = j as u32;
                    j = self.end[j] as usize;
                }
            }
            second
        })
    }

    /// [`TokenTrie::walk_live_roots`] over the tokens whose first byte is
    /// not in `except` (a 256-bit set) only.
    #[inline]
    pub fn walk_live_roots_except(
        &self,
        start: u32,
        dfa: &mut impl LiveBytes,
        except: [u64; 4],
        mut hit: impl FnMut(u32),
    ) {
        let excluded = |b: u8| (except[b as usize / 64] >> (b % 64)) & 1 == 1;
        if self.root.len() != 256 {
            let mut stack = vec![0u32; self.max_depth + 1];
            stack[0] = start;
            for (b, r) in self.roots() {
                if excluded(b) {
                    continue;
                }
                let s = dfa.next(start, b);
                if s == DEAD {
                    continue;
                }
                stack[1] = s;
                if self.token[r] != NONE {
                    hit(self.token[r]);
                }
                self.walk_below(r, &mut stack, &mut |s, b| dfa.next(s, b), &mut hit);
            }
            return;
        }
        let second = self.second_table();
        let mut stack = vec![0u32; self.max_depth + 1];
        stack[0] = start;
        let mut live = dfa.live(start);
        for (w, x) in live.iter_mut().zip(except) {
            *w &= !x;
        }
        for b in byte_set_iter(live) {
            let r = self.root[b as usize];
            if r == NONE {
                continue;
            }
            let s = dfa.next(start, b);
            if s == DEAD {
                continue;
            }
            let r = r as usize;
            stack[1] = s;
            let tok = self.token[r];
            if tok != NONE {
                hit(tok);
            }
            // The second level through `second`, then each live child's
            // subtree as `walk` does.
            let row = &second[b as usize * 256..][..256];
            for b2 in byte_set_iter(dfa.live(s)) {
                let c = row[b2 as usize];
                if c == NONE {
                    continue;
                }
                let s2 = dfa.next(s, b2);
                if s2 == DEAD {
                    continue;
                }
                let c = c as usize;
                stack[2] = s2;
                let tok = self.token[c];
                if tok != NONE {
                    hit(tok);
                }
                self.walk_below(c, &mut stack, &mut |s, b| dfa.next(s, b), &mut hit);
            }
        }
    }

    /// The subtree below node `r` (whose state is `stack[depth(r)]`), as
    /// [`TokenTrie::walk`] walks it.
    #[inline]
    fn walk_below(
        &self,
        r: usize,
        stack: &mut [u32],
        next: &mut impl FnMut(u32, u8) -> u32,
        hit: &mut impl FnMut(u32),
    ) {
        self.walk_range(r + 1, self.end[r] as usize, stack, next, hit);
    }

    /// The nodes `from..to` in trie order (a whole subtree, or the whole
    /// trie), each node's state from its parent's in `stack`; dead
    /// transitions skip their subtree. Returns how many nodes were visited.
    #[inline]
    fn walk_range(
        &self,
        from: usize,
        to: usize,
        stack: &mut [u32],
        next: &mut impl FnMut(u32, u8) -> u32,
        hit: &mut impl FnMut(u32),
    ) -> usize {
        let mut i = from;
        let mut visited = 0usize;
        while i < to {
            let d = self.depth[i] as usize;
            let s = next(stack[d - 1], self.byte[i]);
            visited += 1;
            if s == DEAD {
                i = self.end[i] as usize;
                continue;
            }
            stack[d] = s;
            let tok = self.token[i];
            if tok != NONE {
                hit(tok);
            }
            i += 1;
        }
        visited
    }

    /// Walks the trie from DFA state `start`, calling `hit(token)` for every
    /// token whose bytes keep the state live, and returns how many nodes were
    /// visited. `next(s, b)` returns `DEAD` (u32::MAX) for a dead transition.
    #[inline]
    pub fn walk(
        &self,
        start: u32,
        mut next: impl FnMut(u32, u8) -> u32,
        mut hit: impl FnMut(u32),
    ) -> usize {
        let mut stack = vec![0u32; self.max_depth + 1];
        stack[0] = start;
        self.walk_range(0, self.len(), &mut stack, &mut next, &mut hit)
    }
}

impl TokenTrie {
    /// The nodes of depth 1 (the first bytes of tokens), with their byte,
    /// in byte order.
    pub fn roots(&self) -> impl Iterator<Item = (u8, usize)> + '_ {
        let mut i = 0usize;
        std::iter::from_fn(move || {
            let r = i;
            let b = *self.byte.get(r)?;
            i = self.end[r] as usize;
            Some((b, r))
        })
    }

    /// Like [`TokenTrie::walk`] for the subtree of `node`, whose bytes
    /// have led to the live state `state`, down to depth `max_depth`: calls
    /// `hit` for the live tokens of the subtree (its own first) no deeper,
    /// in trie order.
    pub fn walk_subtree(
        &self,
        node: usize,
        state: u32,
        max_depth: usize,
        mut next: impl FnMut(u32, u8) -> u32,
        mut hit: impl FnMut(u32),
    ) {
        let d0 = self.depth[node] as usize;
        if d0 > max_depth {
            return;
        }
        let mut stack = vec![0u32; self.max_depth + 1];
        stack[d0] = state;
        if self.token[node] != NONE {
            hit(self.token[node]);
        }
        let (mut i, to) = (node + 1, self.end[node] as usize);
        if max_depth >= self.max_depth {
            self.walk_range(i, to, &mut stack, &mut next, &mut hit);
            return;
        }
        while i < to {
            let d = self.depth[i] as usize;
            if d > max_depth {
                i = self.end[i] as usize;
                continue;
            }
            let s = next(stack[d - 1], self.byte[i]);
            if s == DEAD {
                i = self.end[i] as usize;
                continue;
            }
            stack[d] = s;
            if self.token[i] != NONE {
                hit(self.token[i]);
            }
            i += 1;
        }
    }

    /// The children of `node`, with their byte, in byte order.
    pub fn children(&self, node: usize) -> impl Iterator<Item = (u8, usize)> + '_ {
        let (mut i, to) = (node + 1, self.end[node] as usize);
        std::iter::from_fn(move || {
            (i < to).then(|| {
                let c = i;
                i = self.end[c] as usize;
                (self.byte[c], c)
            })
        })
    }

    /// Whether some node deeper than `depth` is live from `start` (some
    /// token prefix of more than `depth` bytes keeps the state live).
    pub fn reaches_depth(&self, start: u32, depth: usize, next: impl Fn(u32, u8) -> u32) -> bool {
        let mut stack = vec![0u32; self.max_depth + 1];
        stack[0] = start;
        let n = self.len();
        let mut i = 0usize;
        while i < n {
            let d = self.depth[i] as usize;
            let s = next(stack[d - 1], self.byte[i]);
            if s == DEAD {
                i = self.end[i] as usize;
                continue;
            }
            if d > depth {
                return true;
            }
            stack[d] = s;
            i += 1;
        }
        false
    }
}

/// Greedy longest-match tokenization of the bytes `next_byte` produces until
/// `stop` says the path ended; returns the tokens' lengths (None when some
/// byte starts no token).
pub(crate) fn longest_prefix_token(
    trie: &TokenTrie,
    mut bytes: impl FnMut(usize) -> Option<u8>,
) -> Option<(usize, TokenId)> {
    let mut node = None;
    let mut best = None;
    let mut k = 0;
    while let Some(b) = bytes(k) {
        match trie.child(node, b) {
            Some(c) => {
                node = Some(c);
                k += 1;
                if trie.token[c] != NONE {
                    best = Some((k, TokenId(trie.token[c])));
                }
            }
            None => break,
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_trie_shape() {
        // Tokens: a, ab, abc, b, ab (dup). Trie (DFS): a(0){ b(1){ c(2) } } b(3)
        let toks: Vec<(&[u8], u32)> =
            vec![(b"a", 0), (b"ab", 1), (b"ab", 4), (b"abc", 2), (b"b", 3)];
        let t = TokenTrie::from_sorted(toks.into_iter());
        assert_eq!(t.byte, b"abcb");
        assert_eq!(t.depth, vec![1, 2, 3, 1]);
        assert_eq!(t.end, vec![3, 3, 3, 4]);
        assert_eq!(t.token, vec![0, 1, 2, 3]);
        assert_eq!(t.dups, vec![(1, 4)]);
        assert_eq!(t.child(None, b'b'), Some(3));
        assert_eq!(t.child(Some(0), b'b'), Some(1));
        assert_eq!(t.child(Some(0), b'c'), None);
    }

    /// Past the cap, a new byte set still gets its tries and evicts the one
    /// asked for least recently; one asked for again is kept.
    #[test]
    fn byte_chains_past_the_cap_evict_the_least_recently_used() {
        let words: Vec<Vec<u8>> = (0u8..=255)
            .map(|b| vec![b])
            .chain(["ab", "abc", "a1", "12", "x\"", "zz"].map(|w| w.as_bytes().to_vec()))
            .collect();
        let tries = tries_of(&words);
        // Sets of 17 bytes each (16 punctuation marks and digits, and one
        // letter), all different.
        let set = |k: u32| -> u128 { (0xFFFFu128 << 40) ^ (1u128 << (97 + k)) };
        let first = tries.byte_chain(set(0)).expect("built");
        for k in 1..BYTE_CHAINS_CACHED as u32 {
            assert!(tries.byte_chain(set(k)).is_some());
        }
        // The first is asked for again: now the second is the oldest.
        assert!(Arc::ptr_eq(&first, &tries.byte_chain(set(0)).unwrap()));
        let extra = BYTE_CHAINS_CACHED as u32;
        assert!(tries.byte_chain(set(extra)).is_some(), "past the cap");
        let cache = tries.byte_chains.lock().unwrap();
        assert_eq!(cache.map.len(), BYTE_CHAINS_CACHED);
        assert!(cache.map.contains_key(&set(0)) && cache.map.contains_key(&set(extra)));
        assert!(
            !cache.map.contains_key(&set(1)),
            "the least recently used goes"
        );
    }

    /// The tries of a vocabulary of `words` (ids in order) and one EOS.
    fn tries_of(words: &[Vec<u8>]) -> VocabTries {
        let n = words.len() as u32;
        let vocab = Vocabulary::new(
            words
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, w)| (TokenId(i as u32), w)),
            [TokenId(n)],
            n as usize + 1,
        )
        .unwrap();
        VocabTries::new(&vocab, 4)
    }

    /// The byte-chain trie equals the trie of its keys sorted as byte
    /// strings (the count byte, then the bytes after the counted ones),
    /// duplicates included, whichever group a token falls in; tokens that
    /// start outside the set are left to the full trie.
    #[test]
    fn byte_chain_trie_is_the_trie_of_its_sorted_keys() {
        let words: Vec<&str> = vec![
            "a",
            "b",
            "ab",
            "ba",
            "a,",
            "ab,",
            ",a",
            ",",
            "aaaaaaaaaaaaaaaaaaaa,",
            "ab;",
            "b;",
            "xa",
            "x",
            ";;",
            "aaaaaaaaaaaaaaaaa",
            "ba,",
            "ab,",
            ",a",
            "a\"b",
            "\"",
        ];
        let mut all: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        all.extend(words.iter().map(|w| w.as_bytes().to_vec()));
        let tries = tries_of(&all);
        let set: u128 = (1 << b'a') | (1 << b'b');
        let built = tries.build_byte_chain(set);
        let in_set = |b: u8| b < 128 && (set >> b) & 1 == 1;
        let mut keys: Vec<(Vec<u8>, u32)> = Vec::new();
        for (b, id) in tries.toks() {
            let k = b.iter().take_while(|&&x| in_set(x)).count();
            if k == 0 || (k == b.len() && k <= BYTE_CHAIN_CAP) {
                continue;
            }
            let j = k.min(BYTE_CHAIN_CAP);
            let mut key = vec![j as u8];
            key.extend_from_slice(&b[j..]);
            keys.push((key, id));
        }
        keys.sort_unstable();
        let want = TokenTrie::from_sorted(keys.iter().map(|(k, id)| (k.as_slice(), *id)));
        let t = &built.trie;
        assert_eq!(
            (&t.byte, &t.depth, &t.end, &t.token, &t.dups, t.max_depth),
            (
                &want.byte,
                &want.depth,
                &want.end,
                &want.token,
                &want.dups,
                want.max_depth
            )
        );
        assert!(!t.dups.is_empty(), "the duplicate words make duplicates");
        // `sets[j]`: the tokens of 1 to j bytes all in the set.
        let ab = |w: &str| all.iter().position(|x| x == w.as_bytes()).unwrap() as u32;
        assert!(built.sets[2].0.contains(TokenId(ab("ab"))));
        assert!(!built.sets[1].0.contains(TokenId(ab("ab"))));
        assert!(!built.sets[16].0.contains(TokenId(ab("xa"))));
    }
}

//! # The prompt-prefix cache
//!
//! Requests to one server mostly share the start of their prompts: Qwen's
//! chat template, the same system prompt, the same tools rendered into it.
//! Prefilling those tokens again for every request is most of a short
//! request's time on a CPU. The decode loop ([`crate::batch`]) therefore
//! keeps, after each new prompt's prefill, a **copy of the sequence** (its
//! KV cache) keyed by the prompt's tokens. A later prompt looks for the
//! entry that shares the longest run of leading tokens with it, starts from
//! a copy of that entry's sequence cut to the shared length, and feeds only
//! the rest (at least its last token, whose logits the request needs).
//!
//! The KV rows of positions `0..L` depend only on tokens `0..L` (attention
//! is causal), so a sequence cut to the shared length is exactly what a
//! fresh prefill of those tokens would have built: the output does not
//! change with the cache (the tests check it on the tiny model).
//!
//! Memory is bounded: entries are counted by the bytes of their KV caches
//! and the least recently used go first once the total passes the limit
//! (`--prefix-cache-mb`, 0 turns the cache off). An entry that is a prefix
//! of a newer prompt is replaced by it (the longer one serves both); a
//! prompt that is a prefix of an entry already held is not stored twice.
//!
//! This is what vLLM's automatic prefix caching and llama.cpp's
//! `--cache-reuse` / slot prompt cache do, at the granularity of whole
//! prompts rather than KV blocks: the cache holds plain sequence copies,
//! the matching is on token ids (never on text), and nothing here needs the
//! model beyond "copy a sequence" and "cut it" ([`crate::batch::BatchModel`]).

use constrain::TokenId;

/// Counters of a prefix cache (for `/health`-style reports and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixStats {
    /// New prompts that started from a cached prefix.
    pub hits: usize,
    /// New prompts that found nothing to reuse.
    pub misses: usize,
    /// Prompt tokens not prefilled thanks to the cache.
    pub reused_tokens: usize,
    /// Entries held now.
    pub entries: usize,
    /// Bytes of KV cache held now.
    pub bytes: usize,
}

struct Entry<S> {
    tokens: Vec<TokenId>,
    seq: S,
    bytes: usize,
    used: u64,
}

/// Cached sequences by prompt, least recently used evicted past `limit` bytes.
pub struct PrefixCache<S> {
    entries: Vec<Entry<S>>,
    limit: usize,
    clock: u64,
    stats: PrefixStats,
}

/// Length of the common leading run of `a` and `b`.
pub fn common_prefix(a: &[TokenId], b: &[TokenId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<S> PrefixCache<S> {
    /// An empty cache holding at most `limit` bytes (0: holds nothing).
    pub fn new(limit: usize) -> Self {
        PrefixCache {
            entries: Vec::new(),
            limit,
            clock: 0,
            stats: PrefixStats::default(),
        }
    }

    /// Whether the cache can hold anything.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// The counters.
    pub fn stats(&self) -> PrefixStats {
        PrefixStats {
            entries: self.entries.len(),
            bytes: self.entries.iter().map(|e| e.bytes).sum(),
            ..self.stats
        }
    }

    /// The entry sharing the longest leading run with `prompt`, and how many
    /// of its tokens may be reused: at most `prompt.len() - 1` (the last
    /// prompt token must be fed for its logits). Counts a hit or a miss.
    pub fn lookup(&mut self, prompt: &[TokenId]) -> Option<(&S, usize)> {
        if !self.enabled() {
            return None;
        }
        let cap = prompt.len().saturating_sub(1);
        let best = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (i, common_prefix(&e.tokens, prompt).min(cap)))
            .filter(|&(_, l)| l > 0)
            .max_by_key(|&(i, l)| (l, self.entries[i].used));
        match best {
            Some((i, l)) => {
                self.clock += 1;
                self.entries[i].used = self.clock;
                self.stats.hits += 1;
                self.stats.reused_tokens += l;
                Some((&self.entries[i].seq, l))
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Whether storing `prompt` would add anything: no entry already holds
    /// it whole. (Checked before the caller pays for a copy.)
    pub fn wants(&mut self, prompt: &[TokenId]) -> bool {
        if !self.enabled() || prompt.is_empty() {
            return false;
        }
        self.clock += 1;
        let now = self.clock;
        for e in &mut self.entries {
            if e.tokens.len() >= prompt.len() && e.tokens[..prompt.len()] == *prompt {
                e.used = now;
                return false;
            }
        }
        true
    }

    /// Stores `seq` (holding exactly `prompt`, `bytes` of KV cache). Drops
    /// the entries it extends, then the least recently used ones until the
    /// total fits; an entry larger than the whole limit is not kept.
    pub fn insert(&mut self, prompt: Vec<TokenId>, seq: S, bytes: usize) {
        if !self.wants(&prompt) || bytes > self.limit {
            return;
        }
        self.entries
            .retain(|e| !(e.tokens.len() <= prompt.len() && prompt[..e.tokens.len()] == *e.tokens));
        self.clock += 1;
        self.entries.push(Entry {
            tokens: prompt,
            seq,
            bytes,
            used: self.clock,
        });
        let mut total: usize = self.entries.iter().map(|e| e.bytes).sum();
        while total > self.limit {
            let Some(oldest) = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| i)
            else {
                break;
            };
            total -= self.entries.swap_remove(oldest).bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[u32]) -> Vec<TokenId> {
        v.iter().map(|&x| TokenId(x)).collect()
    }

    #[test]
    fn longest_shared_prefix_wins_and_the_last_token_is_left_to_feed() {
        let mut c = PrefixCache::new(1000);
        c.insert(t(&[1, 2, 3, 4]), "a", 10);
        c.insert(t(&[1, 2, 9]), "b", 10);
        assert_eq!(
            c.lookup(&t(&[1, 2, 3, 7])).map(|(s, l)| (*s, l)),
            Some(("a", 3))
        );
        // The whole entry matches, but one token must still be fed.
        assert_eq!(
            c.lookup(&t(&[1, 2, 3, 4])).map(|(s, l)| (*s, l)),
            Some(("a", 3))
        );
        assert_eq!(
            c.lookup(&t(&[1, 2, 9, 9])).map(|(s, l)| (*s, l)),
            Some(("b", 3))
        );
        assert!(c.lookup(&t(&[5, 1])).is_none());
        assert!(
            c.lookup(&t(&[1])).is_none(),
            "a one-token prompt reuses nothing"
        );
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.reused_tokens), (3, 2, 9));
    }

    #[test]
    fn bytes_are_bounded_least_recently_used_first() {
        let mut c = PrefixCache::new(25);
        c.insert(t(&[1]), 1, 10);
        c.insert(t(&[2]), 2, 10);
        c.lookup(&t(&[1, 0])); // touches entry 1
        c.insert(t(&[3]), 3, 10); // 30 > 25: entry 2 goes
        let mut held: Vec<u32> = c.entries.iter().map(|e| e.tokens[0].0).collect();
        held.sort();
        assert_eq!(held, vec![1, 3]);
        assert_eq!(c.stats().bytes, 20);
        c.insert(t(&[4]), 4, 26); // larger than the limit: not kept
        assert_eq!(c.stats().entries, 2);
    }

    #[test]
    fn extensions_replace_and_prefixes_are_not_stored_twice() {
        let mut c = PrefixCache::new(100);
        c.insert(t(&[1, 2]), "short", 2);
        c.insert(t(&[1, 2, 3]), "long", 3);
        assert_eq!(c.stats().entries, 1);
        c.insert(t(&[1, 2]), "again", 2);
        assert_eq!(c.stats().entries, 1);
        assert_eq!(c.lookup(&t(&[1, 2, 3, 4])).map(|(s, _)| *s), Some("long"));
    }

    #[test]
    fn a_zero_limit_turns_the_cache_off() {
        let mut c = PrefixCache::new(0);
        c.insert(t(&[1, 2, 3]), (), 1);
        assert!(c.lookup(&t(&[1, 2, 3, 4])).is_none());
        assert_eq!(c.stats(), PrefixStats::default());
    }
}

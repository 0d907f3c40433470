//! # Token budgets: a region of the output bounded in tokens
//!
//! XGrammar's `any_text.max_tokens` — a reasoning model's thinking budget —
//! bounds a stretch of free text by the number of tokens the model spends
//! in it, which no automaton over bytes can count. A [`TokenBudget`] is
//! that bound beside a compiled constraint: the region opens when the
//! output has read one of its `begins` (the empty begin: at the first
//! byte), and closes at the first of its `ends`. Each token that starts
//! while the region is open counts. Once `max_tokens` have counted, the
//! matcher allows only the tokens that go on to close the region: the
//! index's mask for the state, kept to the tokens whose bytes are a prefix
//! of some end still to be written, or begin with one (an end already
//! started in the text — `</th` — may be finished, `ink>`). An end spelled
//! as a special token (`</think>`) is one such token, so the close is never
//! blocked; nothing else of the language changes.
//!
//! The region is the content of the tag that opens the output (the
//! structural tag's lowering checks that, and refuses a budget anywhere
//! else by name): its begin is read from the first byte, so the matcher
//! follows it with a few bytes of state per step and no automaton of its
//! own. Where the language would let the same bytes mean something else
//! (an optional thinking block before free text that may itself start
//! with `<think>`), the budget reads them as the region: that can only
//! narrow the choice, never allow a token the language refuses. Should
//! the narrowed set be empty (no end fits the state), the index's mask
//! stands, as XGrammar relaxes a budget that cannot end where it runs out.
//!
//! Bytes taken without a token ([`crate::Matcher::accept_bytes`]) move the
//! region but count nothing, as XGrammar's `accept_string` does not spend
//! the budget.

use crate::vocab::{TokenId, TokenSet, Vocabulary};

/// A region at the start of the output bounded in tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBudget {
    /// The spellings that open the region (the empty one: it is open from
    /// the first byte).
    begins: Vec<Vec<u8>>,
    /// The spellings that close it (none empty).
    ends: Vec<Vec<u8>>,
    /// Tokens the region may take before an end must follow.
    max_tokens: u32,
}

/// Where the output stands with respect to the region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Region {
    /// The bytes so far, a proper prefix of some begin.
    Before(Vec<u8>),
    /// Inside: tokens counted, and the last bytes read (to find an end).
    Open { tokens: u32, tail: Vec<u8> },
    /// The budget spent and the close begun: what may still be written,
    /// each the rest of an end.
    Closing(Vec<Vec<u8>>),
    /// Closed, or never to open: no budget applies.
    Past,
}

impl TokenBudget {
    /// A budget of `max_tokens` tokens for the text between one of
    /// `begins` (at the start of the output) and one of `ends`, all given
    /// as the bytes the index walks (special tokens spelled as symbols).
    /// `None` when `ends` is empty or holds an empty end.
    pub fn new(begins: Vec<Vec<u8>>, ends: Vec<Vec<u8>>, max_tokens: u32) -> Option<TokenBudget> {
        if ends.is_empty() || ends.iter().any(Vec::is_empty) || begins.is_empty() {
            return None;
        }
        Some(TokenBudget {
            begins,
            ends,
            max_tokens,
        })
    }

    /// Tokens the region may take before it must close.
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// The region at the start of the output.
    pub(crate) fn start(&self) -> Region {
        if self.begins.iter().any(Vec::is_empty) {
            Region::Open {
                tokens: 0,
                tail: Vec::new(),
            }
        } else {
            Region::Before(Vec::new())
        }
    }

    /// The region after `bytes` from `r`; `token`: whether they are one
    /// token (it counts when the region is open before it, or opens inside
    /// it with bytes to spare). A token taken once the budget is spent
    /// begins the close, which then only goes forward: each later token
    /// writes more of the same ends, so the region closes within an end's
    /// length.
    pub(crate) fn step(&self, r: &Region, bytes: &[u8], token: bool) -> Region {
        let keep = self.ends.iter().map(Vec::len).max().unwrap_or(0);
        let mut r = match r {
            Region::Open { tokens, tail } if token && *tokens >= self.max_tokens => {
                Region::Closing(self.rest_of_ends(tail))
            }
            Region::Open { tokens, tail } if token => Region::Open {
                tokens: tokens.saturating_add(1),
                tail: tail.clone(),
            },
            r => r.clone(),
        };
        for (i, &b) in bytes.iter().enumerate() {
            r = match r {
                Region::Past => return Region::Past,
                Region::Before(mut seen) => {
                    seen.push(b);
                    if self.begins.contains(&seen) {
                        let more = token && i + 1 < bytes.len();
                        Region::Open {
                            tokens: u32::from(more),
                            tail: Vec::new(),
                        }
                    } else if self.begins.iter().any(|x| x.starts_with(&seen)) {
                        Region::Before(seen)
                    } else {
                        Region::Past
                    }
                }
                Region::Closing(rest) => {
                    let rest: Vec<Vec<u8>> = rest
                        .into_iter()
                        .filter(|p| p.first() == Some(&b))
                        .map(|p| p[1..].to_vec())
                        .collect();
                    if rest.iter().any(Vec::is_empty) {
                        Region::Past
                    } else if rest.is_empty() {
                        // Off every end (the budget relaxed where no end
                        // fit): spent, and read on as free text.
                        Region::Open {
                            tokens: self.max_tokens,
                            tail: vec![b],
                        }
                    } else {
                        Region::Closing(rest)
                    }
                }
                Region::Open { tokens, mut tail } => {
                    tail.push(b);
                    if self.ends.iter().any(|e| tail.ends_with(e)) {
                        Region::Past
                    } else {
                        if tail.len() > keep {
                            tail.drain(..tail.len() - keep);
                        }
                        Region::Open { tokens, tail }
                    }
                }
            };
        }
        r
    }

    /// With the budget spent in `r`: what may still be written, each the
    /// rest of an end (whole, or finishing one the text has started).
    /// `None` while the budget lasts or outside the region.
    pub(crate) fn closing(&self, r: &Region) -> Option<Vec<Vec<u8>>> {
        match r {
            Region::Open { tokens, tail } if *tokens >= self.max_tokens => {
                Some(self.rest_of_ends(tail))
            }
            Region::Closing(rest) => Some(rest.clone()),
            _ => None,
        }
    }

    /// The rest of each end after `tail`: whole, or finishing one the text
    /// has begun.
    fn rest_of_ends(&self, tail: &[u8]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for e in &self.ends {
            for k in 0..e.len() {
                if tail.ends_with(&e[..k]) && !out.iter().any(|o| o == &e[k..]) {
                    out.push(e[k..].to_vec());
                }
            }
        }
        out
    }

    /// `allowed` kept to the tokens that write toward one of `rest`
    /// (their bytes a prefix of it, or it a prefix of theirs); all of
    /// `allowed` when none does.
    pub(crate) fn narrow(rest: &[Vec<u8>], allowed: &TokenSet, vocab: &Vocabulary) -> TokenSet {
        let mut out = TokenSet::new(allowed.width());
        for t in allowed.iter() {
            let Some(b) = vocab.spelling(t) else { continue };
            if rest.iter().any(|s| s.starts_with(b) || b.starts_with(s)) {
                out.insert(t);
            }
        }
        if out.is_empty() {
            allowed.clone()
        } else {
            out
        }
    }

    /// Whether `t` may be taken in `r` given `allowed` there (the index's
    /// mask): always while the budget lasts.
    pub(crate) fn admits(
        &self,
        r: &Region,
        t: TokenId,
        allowed: &TokenSet,
        vocab: &Vocabulary,
    ) -> bool {
        match self.closing(r) {
            None => true,
            Some(rest) => Self::narrow(&rest, allowed, vocab).contains(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(n: u32) -> TokenBudget {
        TokenBudget::new(vec![b"<think>".to_vec()], vec![b"</think>".to_vec()], n).unwrap()
    }

    #[test]
    fn the_region_opens_after_its_begin_and_counts_the_tokens_inside() {
        let b = budget(2);
        let mut r = b.start();
        assert_eq!(r, Region::Before(Vec::new()));
        r = b.step(&r, b"<thi", true);
        assert!(matches!(r, Region::Before(_)));
        r = b.step(&r, b"nk>", true);
        assert_eq!(
            r,
            Region::Open {
                tokens: 0,
                tail: Vec::new()
            }
        );
        r = b.step(&r, b"hm", true);
        assert!(b.closing(&r).is_none());
        r = b.step(&r, b" ok </", true);
        // Spent: the rest of the end, or the whole end.
        let rest = b.closing(&r).unwrap();
        assert!(rest.contains(&b"think>".to_vec()));
        assert!(rest.contains(&b"</think>".to_vec()));
        assert_eq!(rest.len(), 2);
        // The close only goes forward: `<` now must lead to `/think>`.
        let c = b.step(&r, b"<", true);
        assert_eq!(b.closing(&c), Some(vec![b"/think>".to_vec()]));
        assert_eq!(b.step(&c, b"/think>", true), Region::Past);
        r = b.step(&r, b"think>\n", true);
        assert_eq!(r, Region::Past);
    }

    #[test]
    fn text_that_does_not_open_with_the_begin_never_has_a_budget() {
        let b = budget(0);
        let r = b.step(&b.start(), b"<th", true);
        assert!(matches!(r, Region::Before(_)));
        assert_eq!(b.step(&r, b"ree", true), Region::Past);
        assert_eq!(b.step(&b.start(), b"<tool_call>", true), Region::Past);
        assert_eq!(b.step(&b.start(), b"Hi", true), Region::Past);
    }

    #[test]
    fn a_token_that_opens_the_region_with_bytes_to_spare_counts() {
        let b = budget(1);
        let r = b.step(&b.start(), b"<think>\n", true);
        assert_eq!(
            r,
            Region::Open {
                tokens: 1,
                tail: b"\n".to_vec()
            }
        );
        assert!(b.closing(&r).is_some());
        // Bytes without a token count nothing.
        let r = b.step(&b.start(), b"<think>\nabc", false);
        assert!(b.closing(&r).is_none());
    }

    #[test]
    fn an_empty_begin_opens_at_the_first_byte() {
        let b = TokenBudget::new(vec![Vec::new()], vec![b"</think>".to_vec()], 0).unwrap();
        assert_eq!(b.closing(&b.start()), Some(vec![b"</think>".to_vec()]));
        assert!(TokenBudget::new(vec![Vec::new()], vec![Vec::new()], 1).is_none());
    }
}

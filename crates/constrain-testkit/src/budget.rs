//! Budget-safety under an adversary, shared by the tests of recursion, free-form
//! values and the pushdown engine.
//!
//! [`bytes_and`] builds the usual tiny vocabulary of those tests: ids
//! `0..=255` are the single bytes, then a few multi-byte tokens that cross
//! value boundaries, EOS last. [`adversarial_run`] generates one output under
//! a `max_tokens` budget, choosing among the tokens that still fit
//! ([`Matcher::fits`](constrain::Matcher::fits)) and, with probability `open_bias`, one that opens a
//! container (`[` or `{`): the choice that pushes a structure deepest.
//! Every check is an `Err` naming what broke, so callers can add their own
//! context (schema, stack limit) to the panic.

use constrain::{Compiled, TokenId, Vocabulary};
use rand::Rng;
use std::sync::Arc;

/// Single bytes `0..=255`, then `extra` in order, then EOS (returned).
pub fn bytes_and(extra: &[&str]) -> (Arc<Vocabulary>, TokenId) {
    let mut toks: Vec<(TokenId, Vec<u8>)> =
        (0..=255u8).map(|b| (TokenId(b as u32), vec![b])).collect();
    for t in extra {
        toks.push((TokenId(toks.len() as u32), t.as_bytes().to_vec()));
    }
    let eos = TokenId(toks.len() as u32);
    let v = Vocabulary::new(toks, [eos], eos.0 as usize + 1).expect("a valid tiny vocabulary");
    (Arc::new(v), eos)
}

/// `text` walked byte by byte through a fresh matcher of `c` over a
/// [`bytes_and`] vocabulary (a byte's token is its value): (every prefix
/// viable, the whole text complete).
pub fn byte_verdict(c: &Compiled, text: &[u8]) -> (bool, bool) {
    let mut m = c.matcher();
    let ok = text.iter().all(|&b| m.accept_token(TokenId(b as u32)));
    (ok, ok && m.is_accepting())
}

/// Whether `c` accepts `text` whole, walked as [`byte_verdict`] walks it.
pub fn byte_accepts(c: &Compiled, text: impl AsRef<[u8]>) -> bool {
    byte_verdict(c, text.as_ref()).1
}

/// One output of at most `max_tokens` tokens from a fresh matcher of `c`:
/// at each step a token that [fits](constrain::Matcher::fits) the tokens
/// left, one opening a container with probability `open_bias` where such a
/// token fits. Returns the bytes produced (EOS excluded) once EOS is taken
/// or the budget is spent with the text accepted; an `Err` says which
/// promise broke (no token fits, the budget is unknown, the text was cut).
pub fn adversarial_run(
    c: &Compiled,
    eos: TokenId,
    max_tokens: usize,
    open_bias: f64,
    rng: &mut impl Rng,
) -> Result<Vec<u8>, String> {
    let v = c.vocab();
    let mut m = c.matcher();
    let mut out = Vec::new();
    for used in 0..max_tokens {
        let left = max_tokens - used;
        if m.tokens_to_accept().is_none() {
            return Err(format!(
                "budget unknown after {:?}",
                String::from_utf8_lossy(&out)
            ));
        }
        let fits: Vec<TokenId> = m.allowed().iter().filter(|&t| m.fits(t, left)).collect();
        if fits.is_empty() {
            return Err(format!(
                "no token fits with {left} left after {:?}",
                String::from_utf8_lossy(&out)
            ));
        }
        let open: Vec<TokenId> = fits
            .iter()
            .copied()
            .filter(|&t| {
                v.token_bytes(t)
                    .is_some_and(|b| b.iter().any(|b| b"[{".contains(b)))
            })
            .collect();
        let pool = if !open.is_empty() && rng.random_bool(open_bias) {
            &open
        } else {
            &fits
        };
        let t = pool[rng.random_range(0..pool.len())];
        if !m.accept_token(t) {
            return Err(format!("an allowed token {t:?} was refused"));
        }
        if t == eos {
            return Ok(out);
        }
        out.extend_from_slice(v.token_bytes(t).unwrap_or_default());
    }
    if m.is_accepting() {
        Ok(out)
    } else {
        Err(format!(
            "cut at {max_tokens} tokens: {:?}",
            String::from_utf8_lossy(&out)
        ))
    }
}

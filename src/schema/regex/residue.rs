//! # Integers that are not multiples of `k`: the complement of `multipleOf`
//!
//! `¬multipleOf k` for an integer `k` is, among the numbers, every number
//! with a fractional part (see `Gen::fractional_number`) and every integer
//! whose remainder by `k` is not zero. [`Gen::not_multiple_number`] writes
//! the second set within the node's bounds:
//!
//! - a bounded range with few multiples: the range minus the enumerated
//!   multiples (a product automaton, `Op::AndNot`);
//! - `k` dividing a power of ten `10^m` (m ≤ 4): the last `m` digits decide,
//!   within any bounds (`numeric::suffix_non_multiples`; with the node's
//!   own `multipleOf` too, [`non_multiple_suffix`] and a product), at most
//!   15 digits in all, as for the multiples (`numeric::suffix_multiples`):
//!   past 2^53 a validator that reads numbers as `f64` may round a
//!   non-multiple onto a multiple;
//! - otherwise *narrowed* (sound, with a warning naming the keyword and the
//!   window): the non-multiples among `max_enumerated_multiples` candidate
//!   integers (multiples of the node's own integer `multipleOf`, if any)
//!   from the lower bound, up to the upper bound, or around 0, listed as a
//!   trie ([`Gen::narrowed_not_multiples`]). (The remainder automaton
//!   `r ↦ (10·r + d) mod k` is regular, but with the 15-digit cap its regex
//!   is far past `max_product_len` for every `k ≥ 3`, measured.) The
//!   multiples themselves (`multipleOf k` alone, no bounded range) are
//!   narrowed the same way in `Gen::integer_multiples`.
//!
//! A fractional `k` fails closed (validators read it in floating point,
//! differently from one another).

use super::*;
use crate::dfa::algebra::Op;

/// The non-zero integers of at most 15 digits that are not multiples of
/// `k` (≥ 2) when `k` divides `10^m` for some `m ≤ 4`, by their last `m`
/// digits; `None` for other `k`.
pub(super) fn non_multiple_suffix(k: u64) -> Option<String> {
    let m = (1..=4u32).find(|&m| 10u64.pow(m) % k == 0)?;
    let p = 10u64.pow(m);
    let small: Vec<String> = (1..p)
        .filter(|v| v % k != 0)
        .map(|v| v.to_string())
        .collect();
    let suffixes: Vec<String> = (0..p)
        .filter(|v| v % k != 0)
        .map(|v| format!("{v:0width$}", width = m as usize))
        .collect();
    let long = format!(
        "[1-9][0-9]{{0,{}}}{}",
        14 - m,
        numeric::trie_regex(&suffixes)
    );
    Some(format!("-?(?:{}|{long})", numeric::trie_regex(&small)))
}

impl Gen<'_, '_> {
    /// The integers of `n` (bounds, `multipleOf`) that are multiples of none
    /// of `n.not_multiple_of` (see the module notes).
    #[inline(never)]
    pub(super) fn not_multiple_number(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        let mut base = n.clone();
        base.not_multiple_of.clear();
        let Some(mut lang) = self.number(&base, Types::INTEGER)? else {
            return Ok(None);
        };
        let (l, h) = numeric::integer_bounds(n.minimum.as_ref(), n.maximum.as_ref());
        // Over the node's integer range alone, divisors of powers of ten
        // give the non-multiples within the bounds directly.
        if base.multiple_of.is_none() {
            let ks: Option<Vec<u64>> = n
                .not_multiple_of
                .iter()
                .map(|m| m.value.to_i128().filter(|_| m.value.is_integer()))
                .map(|k| k.and_then(|k| u64::try_from(k).ok()))
                .collect();
            if let Some(r) =
                ks.and_then(|ks| numeric::suffix_non_multiples(l.as_ref(), h.as_ref(), &ks))
            {
                return Ok(text_lang(r));
            }
        }
        for m in &n.not_multiple_of {
            let too = |detail: String| SchemaError::UnsupportedValue {
                what: "keyword \"not\"".into(),
                pointer: m.at.clone(),
                detail,
            };
            let k = match m.value.to_i128() {
                Some(k) if m.value.is_integer() && k > 0 => k,
                _ => {
                    return Err(too(format!(
                        "the complement of \"multipleOf\" {} is not supported (fractional: floating-point semantics)",
                        m.value
                    )))
                }
            };
            if k == 1 {
                return Ok(None);
            }
            let bounded = match (&l, &h) {
                (Some(a), Some(b)) => match (a.to_i128(), b.to_i128()) {
                    (Some(a), Some(b)) if b >= a => Some((a, b)).filter(|(a, b)| {
                        ((b - a) / k) as u64 <= self.opts.max_enumerated_multiples
                    }),
                    (Some(_), Some(_)) => return Ok(None),
                    _ => None,
                },
                _ => None,
            };
            let next = if let Some((a, b)) = bounded {
                match numeric::enumerate_multiples(a, b, k) {
                    Some(mult) => {
                        self.combine(&lang.text(), &mult, Op::AndNot, "not: multipleOf", &m.at)?
                    }
                    None => Some(lang.clone()),
                }
            } else if let Some(nm) = u64::try_from(k).ok().and_then(non_multiple_suffix) {
                // `lang` already carries more than the range here (an own
                // `multipleOf`, or an earlier divisor): the product keeps it.
                self.combine(&lang.text(), &nm, Op::And, "not: multipleOf", &m.at)?
            } else if let Some(r) = self.narrowed_not_multiples(n, &l, &h) {
                return Ok(r);
            } else {
                // Addressed like the complement errors raised while
                // negating: the schema holding the `not`, the detail saying
                // where the `multipleOf` is. Lenient: the `not` is ignored.
                let owner =
                    m.at.as_str()
                        .strip_suffix("/not")
                        .map(|p| Pointer(p.to_string()))
                        .unwrap_or_else(|| m.at.clone());
                let e = SchemaError::UnsupportedValue {
                    what: "keyword \"not\"".into(),
                    pointer: owner,
                    detail: format!(
                        "the complement of \"multipleOf\" {k} is not supported over an unbounded range (only where {k} divides a power of ten) (at {})",
                        m.at
                    ),
                };
                self.doc.soft(e, self.opts.lenient)?;
                Some(lang.clone())
            };
            match next {
                Some(x) => lang = x,
                None => return Ok(None),
            }
        }
        Ok(Some(lang))
    }
}

/// The integers in `values` as one regex (`None`: no value).
fn listed_integers(values: &[i128]) -> Option<String> {
    let pos: Vec<String> = values
        .iter()
        .filter(|v| **v >= 0)
        .map(|v| v.to_string())
        .collect();
    let neg: Vec<String> = values
        .iter()
        .filter(|v| **v < 0)
        .map(|v| (-v).to_string())
        .collect();
    match (pos.is_empty(), neg.is_empty()) {
        (true, true) => None,
        (false, true) => Some(numeric::trie_regex(&pos)),
        (true, false) => Some(format!("-{}", numeric::trie_regex(&neg))),
        (false, false) => Some(format!(
            "(?:{}|-{})",
            numeric::trie_regex(&pos),
            numeric::trie_regex(&neg)
        )),
    }
}

impl Gen<'_, '_> {
    /// The integers of `n` that are multiples of none of its
    /// `not_multiple_of`, *narrowed* to a window of
    /// `max_enumerated_multiples` candidates (multiples of the node's own
    /// integer `multipleOf`, or all integers) from the lower bound, up to
    /// the upper bound, or around 0; listed value by value, with a warning.
    /// Sound (a subset of the exact set); used where the range is unbounded
    /// and `k` divides no power of ten. `None`: a divisor is not a positive
    /// integer (the caller reports it).
    fn narrowed_not_multiples(
        &mut self,
        n: &Node,
        l: &Option<Dec>,
        h: &Option<Dec>,
    ) -> Option<Lang> {
        let int = |d: &Dec| d.to_i128().filter(|k| d.is_integer() && *k > 0);
        let step = match &n.multiple_of {
            None => 1,
            Some(m) => int(&m.value)?,
        };
        let ks: Vec<i128> = n
            .not_multiple_of
            .iter()
            .map(|m| int(&m.value))
            .collect::<Option<_>>()?;
        const CAP: i128 = 999_999_999_999_999;
        let count = self.opts.max_enumerated_multiples.max(1) as i128;
        let span = step.saturating_mul(count - 1);
        let (a, b) = match (
            l.as_ref().map(|v| v.to_i128()),
            h.as_ref().map(|v| v.to_i128()),
        ) {
            (Some(Some(a)), Some(Some(b))) => (a, b.min(a.saturating_add(span))),
            (Some(Some(a)), None) => (a, a.saturating_add(span)),
            (None, Some(Some(b))) => (b.saturating_sub(span), b),
            (None, None) => (-(span / 2), span / 2),
            _ => return None,
        };
        let (a, b) = (a.max(-CAP), b.min(CAP));
        let first = a.div_euclid(step) * step + if a.rem_euclid(step) == 0 { 0 } else { step };
        let mut values = Vec::new();
        let mut v = first;
        while v <= b {
            if ks.iter().all(|k| v % k != 0) {
                values.push(v);
            }
            v += step;
        }
        let at = n
            .not_multiple_of
            .first()
            .map(|m| m.at.clone())
            .unwrap_or_default();
        self.doc.warn(
            &at,
            format!(
                "not multipleOf {} without a bounded range: narrowed to the integers in [{a}, {b}] (max_enumerated_multiples)",
                ks.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
            ),
        );
        Some(text_lang(listed_integers(&values)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_multiple_suffixes_match_exactly_the_non_multiples() {
        for k in [2u64, 4, 5, 8, 20, 25, 16] {
            let re = non_multiple_suffix(k).expect("divides a power of ten");
            let r = regex_automata::meta::Regex::new(&format!("^(?:{re})$")).expect("regex");
            for x in -3000i64..3000 {
                let want = x % k as i64 != 0;
                assert_eq!(r.is_match(&x.to_string()), want, "k={k} x={x}");
            }
            assert!(!r.is_match("1234567890123451"), "k={k}: 16 digits");
            assert!(!r.is_match("012"), "k={k}: non-canonical");
        }
        assert!(non_multiple_suffix(3).is_none());
    }
}

//! # Multiples of `multipleOf`
//!
//! Integer multiples by their last digits (`k` dividing `10^m`, within any
//! bounds, [`suffix_multiples`]), listed multiples ([`enumerate_multiples`])
//! and decimal multiples of a fractional `multipleOf` ([`decimal_multiples`]).
//! Integer parts have at most 15 digits: beyond 2^53 a validator that reads
//! numbers as `f64` may round a non-multiple onto a multiple.

use super::{alt, trie_regex, uint_range, Dec};

/// The largest magnitude of an integer multiple: 15 digits.
const MULTIPLE_CAP: i128 = 999_999_999_999_999;

/// Canonical integers in `[lo, hi]` (`None`: unbounded) that are multiples
/// of `k` when `k` divides `10^m` for some `m ≤ 4`, exactly, at most 15
/// digits. The outer `None`: `k` is not of that kind; the inner: no value.
///
/// A number of more than `m` digits is `p·10^m + s` with a prefix `p ≥ 1`
/// and an `m`-digit suffix `s` among the multiples below `10^m`; the bounds
/// split on the prefix (`p` strictly between the bounds' prefixes takes
/// every suffix, `p` equal to one takes the suffixes on its side), so the
/// regex grows with the digits of the bounds, not with their distance.
/// Shorter numbers are listed (at most `10^m`).
pub fn suffix_multiples(lo: Option<&Dec>, hi: Option<&Dec>, k: u64) -> Option<Option<String>> {
    by_suffix(lo, hi, &[k], true)
}

/// The same for the integers that are multiples of **none** of `ks` (the
/// complement of `multipleOf` within bounds, for each divisor); `None`
/// when one of them divides no power of ten `10^m`, `m ≤ 4`.
pub fn suffix_non_multiples(
    lo: Option<&Dec>,
    hi: Option<&Dec>,
    ks: &[u64],
) -> Option<Option<String>> {
    by_suffix(lo, hi, ks, false)
}

/// The integers in the bounds that are multiples of every one of `ks`
/// (`multiples`) or of none; each divides `10^m` for the largest `m`
/// among theirs, so the last `m` digits decide.
fn by_suffix(
    lo: Option<&Dec>,
    hi: Option<&Dec>,
    ks: &[u64],
    multiples: bool,
) -> Option<Option<String>> {
    let m = ks
        .iter()
        .map(|&k| (0..=4u32).find(|&m| k > 0 && 10u64.pow(m) % k == 0))
        .try_fold(0, |a, m| m.map(|m| a.max(m)))?;
    let clamp = |d: &Dec| match d.to_i128() {
        Some(v) => v.clamp(-MULTIPLE_CAP - 1, MULTIPLE_CAP + 1),
        None if d.neg => -MULTIPLE_CAP - 1,
        None => MULTIPLE_CAP + 1,
    };
    let lo = lo.map_or(-MULTIPLE_CAP, clamp).max(-MULTIPLE_CAP);
    let hi = hi.map_or(MULTIPLE_CAP, clamp).min(MULTIPLE_CAP);
    if lo > hi {
        return Some(None);
    }
    let keep = |v: i128| {
        if multiples {
            ks.iter().all(|&k| v % k as i128 == 0)
        } else {
            ks.iter().all(|&k| v % k as i128 != 0)
        }
    };
    let mut parts = Vec::new();
    if hi >= 0 {
        parts.push(uint_by_suffix(lo.max(0), hi, m as usize, &keep));
    }
    if lo < 0 {
        let mags = uint_by_suffix((-hi).max(1), -lo, m as usize, &keep);
        parts.push(mags.map(|r| format!("-{r}")));
    }
    Some(alt(parts))
}

/// Canonical non-negative integers in `[lo, hi]` (`0 ≤ lo`, `hi ≤
/// MULTIPLE_CAP`) whose value modulo `10^m` passes `keep` (see
/// [`suffix_multiples`]).
fn uint_by_suffix(lo: i128, hi: i128, m: usize, keep: &dyn Fn(i128) -> bool) -> Option<String> {
    if lo > hi {
        return None;
    }
    let p10 = 10i128.pow(m as u32);
    let mut parts = Vec::new();
    if lo < p10 {
        let short: Vec<String> = (lo..=hi.min(p10 - 1))
            .filter(|&v| keep(v))
            .map(|v| v.to_string())
            .collect();
        parts.push((!short.is_empty()).then(|| trie_regex(&short)));
    }
    if hi >= p10 {
        // The m-digit suffixes in [a, b] that pass `keep`.
        let suffixes = |a: i128, b: i128| -> Option<String> {
            let v: Vec<String> = (a..=b)
                .filter(|&s| keep(s))
                .map(|s| {
                    if m == 0 {
                        String::new()
                    } else {
                        format!("{s:0m$}")
                    }
                })
                .collect();
            (!v.is_empty()).then(|| trie_regex(&v))
        };
        let (lp, ls) = if lo >= p10 {
            (lo / p10, lo % p10)
        } else {
            (1, 0)
        };
        let (hp, hs) = (hi / p10, hi % p10);
        if lp == hp {
            parts.push(suffixes(ls, hs).map(|s| format!("{lp}{s}")));
        } else {
            parts.push(suffixes(ls, p10 - 1).map(|s| format!("{lp}{s}")));
            if lp + 1 < hp {
                let mid = uint_range(&(lp + 1).to_string(), Some(&(hp - 1).to_string()));
                let all = suffixes(0, p10 - 1);
                parts.push(mid.zip(all).map(|(r, all)| format!("{r}{all}")));
            }
            parts.push(suffixes(0, hs).map(|s| format!("{hp}{s}")));
        }
    }
    alt(parts)
}

/// Most significant digits of a decimal multiple (integer and fraction
/// digits together are not bounded; the integer part has at most 15 digits,
/// so every value keeps its exact decimal reading in `f64` range).
const MULTIPLE_INT_DIGITS: usize = 15;

/// Numbers in plain decimal notation (`-?I(.F)?`, no exponent) that are
/// exact multiples of the decimal `m` (> 0), read as decimals: `x` is a
/// multiple when `x / m` is an integer over the rationals, which is what
/// the JSON Schema specification says and what the decimal text means
/// (validators that divide in binary floating point disagree with each
/// other and with the text: see `Gen::decimal_multiple_of`).
///
/// With `m = c·10^-s` (`c` an integer), `x` is a multiple exactly when
/// `x·10^s` is an integer (at most `s` fraction digits, then zeros) and
/// that integer is divisible by `c`. When `c = 2^a·5^b` the last
/// `t = max(a, b)` digits of `x·10^s` decide, so the language is a union,
/// over the `10^t / c` admissible digit suffixes, of "integer part ending
/// in these digits, fraction starting with those". `Err` says why another
/// `m` is refused (`c` with another prime factor, or more than
/// `max_suffixes` suffixes).
pub fn decimal_multiples(m: &Dec, max_suffixes: usize) -> Result<String, String> {
    if m.neg || m.is_zero() {
        return Err(format!("multipleOf {m} is not positive"));
    }
    let s = m.frac.len();
    let digits = format!("{}{}", m.int, m.frac);
    let digits = digits.trim_start_matches('0');
    if digits.len() > 15 {
        return Err(format!(
            "multipleOf {m} has more than 15 significant digits"
        ));
    }
    let c: u64 = digits.parse().map_err(|_| format!("multipleOf {m}"))?;
    let (mut a, mut b, mut rest) = (0usize, 0usize, c);
    while rest % 2 == 0 {
        rest /= 2;
        a += 1;
    }
    while rest % 5 == 0 {
        rest /= 5;
        b += 1;
    }
    if rest != 1 {
        return Err(format!(
            "multipleOf {m}: {c} is not a divisor of a power of ten (its multiples are not decided by the last digits)"
        ));
    }
    let t = a.max(b);
    if t > 6 || (10u64.pow(t as u32) / c) as usize > max_suffixes {
        return Err(format!(
            "multipleOf {m}: more than {max_suffixes} admissible digit suffixes"
        ));
    }
    let p = 10u64.pow(t as u32);
    let mut parts: Vec<String> = Vec::new();
    for r in (0..p).step_by(c as usize) {
        let r = if t == 0 {
            String::new()
        } else {
            format!("{r:0t$}")
        };
        // r splits into the integer part's last digits and the fraction's.
        let in_int = t.saturating_sub(s);
        let (ri, rf) = r.split_at(in_int);
        let int = if ri.is_empty() {
            format!("(?:0|[1-9][0-9]{{0,{}}})", MULTIPLE_INT_DIGITS - 1)
        } else {
            let canon = ri.trim_start_matches('0');
            let canon = if canon.is_empty() { "0" } else { canon };
            let free = MULTIPLE_INT_DIGITS.saturating_sub(ri.len() + 1);
            format!("(?:[1-9][0-9]{{0,{free}}}{ri}|{canon})")
        };
        // The s fraction digits: free ones, then the suffix's.
        let fixed: Vec<Option<u8>> = std::iter::repeat_n(None, s - rf.len())
            .chain(rf.bytes().map(Some))
            .collect();
        let mut fracs: Vec<String> = Vec::new();
        for k in 0..=s {
            // Written with k digits: the rest of the s digits must be zero.
            if fixed[k..].iter().any(|d| d.is_some_and(|d| d != b'0')) {
                continue;
            }
            if k == 0 {
                fracs.push("(?:\\.0+)?".into());
            } else {
                let body: String = fixed[..k]
                    .iter()
                    .map(|d| match d {
                        None => "[0-9]".to_string(),
                        Some(d) => (*d as char).to_string(),
                    })
                    .collect();
                fracs.push(format!("\\.{body}0*"));
            }
        }
        parts.push(format!("{int}(?:{})", fracs.join("|")));
    }
    Ok(format!("-?(?:{})", parts.join("|")))
}

/// The integers `lo, lo+k, ...` up to `hi`, as a prefix-shared alternation.
pub fn enumerate_multiples(lo: i128, hi: i128, k: i128) -> Option<String> {
    if k <= 0 || lo > hi {
        return None;
    }
    let first = lo.div_euclid(k) * k + if lo.rem_euclid(k) == 0 { 0 } else { k };
    let mut neg = Vec::new();
    let mut pos = Vec::new();
    let mut v = first;
    while v <= hi {
        if v < 0 {
            neg.push((-v).to_string());
        } else {
            pos.push(v.to_string());
        }
        v += k;
    }
    let mut parts = Vec::new();
    if !pos.is_empty() {
        parts.push(Some(trie_regex(&pos)));
    }
    if !neg.is_empty() {
        parts.push(Some(format!("-{}", trie_regex(&neg))));
    }
    alt(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(s: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{s})$")).unwrap()
    }

    #[test]
    fn multiples_by_suffix() {
        for k in [1u64, 2, 4, 5, 10, 25, 50, 100] {
            let r = re(&suffix_multiples(None, None, k).unwrap().unwrap());
            for v in -500i64..500 {
                assert_eq!(r.is_match(&v.to_string()), v % k as i64 == 0, "{v} % {k}");
            }
        }
        assert!(suffix_multiples(None, None, 7).is_none());
        let r = re(&enumerate_multiples(-20, 30, 7).unwrap());
        for v in -50..50 {
            assert_eq!(
                r.is_match(&v.to_string()),
                (-20..=30).contains(&v) && v % 7 == 0
            );
        }
    }

    #[test]
    fn suffix_multiples_within_bounds_are_exact() {
        let d = |v: i64| Dec::from_i64(v);
        let bounds: [(Option<i64>, Option<i64>); 12] = [
            (Some(0), None),
            (Some(1), None),
            (None, Some(100)),
            (None, Some(-7)),
            (Some(-13), None),
            (Some(-1234), Some(5678)),
            (Some(95), Some(105)),
            (Some(10_001), Some(10_003)),
            (Some(-99_999), Some(-1)),
            (Some(7), Some(7)),
            (Some(12_345), None),
            (None, None),
        ];
        for k in [
            1u64, 2, 4, 5, 8, 10, 16, 20, 25, 125, 250, 625, 1000, 10_000,
        ] {
            for (lo, hi) in bounds {
                let r = suffix_multiples(lo.map(d).as_ref(), hi.map(d).as_ref(), k)
                    .expect("k divides a power of ten");
                let r = r.map(|r| re(&r));
                for v in (-120_000i64..120_000).filter(|v| v % 13 == 0 || v.abs() < 1500) {
                    let want =
                        v % k as i64 == 0 && lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
                    let got = r.as_ref().is_some_and(|r| r.is_match(&v.to_string()));
                    assert_eq!(got, want, "{v} in [{lo:?}, {hi:?}] multiple of {k}");
                }
                if let Some(r) = &r {
                    assert!(!r.is_match("-0") && !r.is_match("00") && !r.is_match("05"));
                }
            }
        }
        assert!(suffix_multiples(None, None, 3).is_none());
        for k in [2u64, 5, 25, 16] {
            for (lo, hi) in bounds {
                let r = suffix_non_multiples(lo.map(d).as_ref(), hi.map(d).as_ref(), &[k]).unwrap();
                let r = r.map(|r| re(&r));
                for v in (-120_000i64..120_000).filter(|v| v % 13 == 0 || v.abs() < 1500) {
                    let want =
                        v % k as i64 != 0 && lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
                    let got = r.as_ref().is_some_and(|r| r.is_match(&v.to_string()));
                    assert_eq!(got, want, "{v} in [{lo:?}, {hi:?}] not a multiple of {k}");
                }
            }
        }
        // 15 digits at most; a bound past that is clamped, one beyond it empties.
        let r = re(&suffix_multiples(Some(&d(0)), None, 5).unwrap().unwrap());
        assert!(r.is_match("999999999999995") && !r.is_match("1000000000000000"));
        let big = Dec::parse("1e20").unwrap();
        assert_eq!(suffix_multiples(Some(&big), None, 5), Some(None));
    }
}

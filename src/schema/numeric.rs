//! # Numbers: exact ranges as regexes
//!
//! JSON numbers are text, so a bound such as `minimum: 18` becomes a regex over
//! digit strings. Everything here works on decimal strings ([`Dec`]), never on
//! floats, so bounds of any size are exact.
//!
//! - [`int_range`]: canonical integers (`0`, `-7`, `123`; no leading zeros, no
//!   `-0`) in `[lo, hi]`, either side open. The classic digit-range
//!   construction: split at digit-count boundaries, then on the first digit
//!   where the bounds differ.
//! - [`decimal_range`]: numbers `-?I(.F)?` (no exponent) in a range with
//!   inclusive or exclusive decimal bounds: integer part by [`int_range`]-style
//!   ranges, fraction digits compared lexicographically (a fraction is a digit
//!   string compared as if padded with zeros).
//! - [`number_any`] and the zero-bounded forms keep the exponent: the sign
//!   alone decides the range there.
//! - [`suffix_multiples`]: integer multiples of `k` within any bounds when
//!   `k` divides a power of ten (the last digits decide),
//!   [`enumerate_multiples`] for small bounded ranges, [`decimal_multiples`]
//!   for a fractional `multipleOf` (module `multiples`).
//!
//! A regex fragment is an `Option<String>`: `None` is the empty language.

use std::cmp::Ordering;

mod multiples;
pub use multiples::*;

/// An exact decimal: sign, integer digits (no leading zeros; `"0"` for zero),
/// fraction digits (no trailing zeros).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dec {
    pub neg: bool,
    pub int: String,
    pub frac: String,
}

impl Dec {
    /// Parses JSON number text (`-12.5e3` and the like).
    pub fn parse(text: &str) -> Option<Dec> {
        let (neg, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mant, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
            None => (rest, 0),
        };
        let (ip, fp) = match mant.find('.') {
            Some(i) => (&mant[..i], &mant[i + 1..]),
            None => (mant, ""),
        };
        if ip.is_empty() || !ip.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if !fp.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if exp.abs() > 10_000 {
            return None;
        }
        let mut digits: String = format!("{ip}{fp}");
        let mut point = ip.len() as i64 + exp;
        if point < 0 {
            digits = "0".repeat((-point) as usize) + &digits;
            point = 0;
        }
        if point as usize > digits.len() {
            digits += &"0".repeat(point as usize - digits.len());
        }
        let (i, f) = digits.split_at(point as usize);
        let int = i.trim_start_matches('0');
        let int = if int.is_empty() { "0" } else { int };
        let frac = f.trim_end_matches('0');
        let is_zero = int == "0" && frac.is_empty();
        Some(Dec {
            neg: neg && !is_zero,
            int: int.to_string(),
            frac: frac.to_string(),
        })
    }

    #[cfg(test)]
    pub fn from_i64(v: i64) -> Dec {
        Dec::parse(&v.to_string()).expect("an integer is a number")
    }

    pub fn zero() -> Dec {
        Dec {
            neg: false,
            int: "0".into(),
            frac: String::new(),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.int == "0" && self.frac.is_empty()
    }

    pub fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    pub fn negate(&self) -> Dec {
        Dec {
            neg: !self.neg && !self.is_zero(),
            ..self.clone()
        }
    }

    fn abs_cmp(&self, other: &Dec) -> Ordering {
        cmp_uint(&self.int, &other.int).then_with(|| {
            let n = self.frac.len().max(other.frac.len());
            let a = format!("{:0<n$}", self.frac);
            let b = format!("{:0<n$}", other.frac);
            a.cmp(&b)
        })
    }

    /// Largest integer ≤ self.
    pub fn floor(&self) -> Dec {
        if self.is_integer() {
            return self.clone();
        }
        if self.neg {
            Dec {
                neg: true,
                int: add_one(&self.int),
                frac: String::new(),
            }
        } else {
            Dec {
                neg: false,
                int: self.int.clone(),
                frac: String::new(),
            }
        }
    }

    /// Smallest integer ≥ self.
    pub fn ceil(&self) -> Dec {
        self.negate().floor().negate()
    }

    /// self + 1 for an integer.
    pub fn succ(&self) -> Dec {
        debug_assert!(self.is_integer());
        if self.neg {
            let m = sub_one(&self.int);
            Dec {
                neg: m != "0",
                int: m,
                frac: String::new(),
            }
        } else {
            Dec {
                neg: false,
                int: add_one(&self.int),
                frac: String::new(),
            }
        }
    }

    /// self - 1 for an integer.
    pub fn pred(&self) -> Dec {
        self.negate().succ().negate()
    }

    /// The value as i128 when it is an integer that fits.
    pub fn to_i128(&self) -> Option<i128> {
        if !self.is_integer() || self.int.len() > 37 {
            return None;
        }
        let m: i128 = self.int.parse().ok()?;
        Some(if self.neg { -m } else { m })
    }
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Dec {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.neg, other.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.abs_cmp(other),
            (true, true) => other.abs_cmp(self),
        }
    }
}

impl std::fmt::Display for Dec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.neg {
            f.write_str("-")?;
        }
        f.write_str(&self.int)?;
        if !self.frac.is_empty() {
            write!(f, ".{}", self.frac)?;
        }
        Ok(())
    }
}

fn cmp_uint(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn add_one(s: &str) -> String {
    let mut d: Vec<u8> = s.bytes().collect();
    let mut i = d.len();
    loop {
        if i == 0 {
            d.insert(0, b'1');
            break;
        }
        i -= 1;
        if d[i] == b'9' {
            d[i] = b'0';
        } else {
            d[i] += 1;
            break;
        }
    }
    String::from_utf8(d).expect("digits")
}

fn sub_one(s: &str) -> String {
    if s == "0" {
        return "1".into(); // |0 - 1| = 1 (caller handles the sign)
    }
    let mut d: Vec<u8> = s.bytes().collect();
    let mut i = d.len();
    while i > 0 {
        i -= 1;
        if d[i] == b'0' {
            d[i] = b'9';
        } else {
            d[i] -= 1;
            break;
        }
    }
    let out = String::from_utf8(d).expect("digits");
    let t = out.trim_start_matches('0');
    if t.is_empty() {
        "0".into()
    } else {
        t.into()
    }
}

/// A bound: value and whether it is exclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub value: Dec,
    pub exclusive: bool,
}

/// `(?:a|b|...)`, or `None` when every part is empty.
pub(crate) fn alt(parts: Vec<Option<String>>) -> Option<String> {
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    match parts.len() {
        0 => None,
        1 => Some(parts.into_iter().next().unwrap()),
        _ => Some(format!("(?:{})", parts.join("|"))),
    }
}

fn digit_class(lo: u8, hi: u8) -> String {
    if lo == hi {
        (lo as char).to_string()
    } else if lo == b'0' && hi == b'9' {
        "[0-9]".into()
    } else {
        format!("[{}-{}]", lo as char, hi as char)
    }
}

fn any_digits(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => "[0-9]".into(),
        _ => format!("[0-9]{{{n}}}"),
    }
}

/// Digit strings of a's length (leading zeros allowed) in `[a, b]`.
fn same_len(a: &[u8], b: &[u8]) -> String {
    debug_assert_eq!(a.len(), b.len());
    if a.is_empty() {
        return String::new();
    }
    if a == b {
        return String::from_utf8(a.to_vec()).unwrap();
    }
    let (da, db) = (a[0], b[0]);
    let rest = a.len() - 1;
    if da == db {
        return format!("{}{}", da as char, same_len(&a[1..], &b[1..]));
    }
    let a_low = a[1..].iter().all(|&c| c == b'0');
    let b_high = b[1..].iter().all(|&c| c == b'9');
    let mut parts = Vec::new();
    let mut mid_lo = da + 1;
    let mut mid_hi = db - 1;
    if a_low {
        mid_lo = da;
    } else {
        let nines = vec![b'9'; rest];
        parts.push(Some(format!("{}{}", da as char, same_len(&a[1..], &nines))));
    }
    if b_high {
        mid_hi = db;
    }
    if mid_lo <= mid_hi {
        parts.push(Some(format!(
            "{}{}",
            digit_class(mid_lo, mid_hi),
            any_digits(rest)
        )));
    }
    if !b_high {
        let zeros = vec![b'0'; rest];
        parts.push(Some(format!("{}{}", db as char, same_len(&zeros, &b[1..]))));
    }
    alt(parts).unwrap_or_default()
}

/// Canonical non-negative integers (no leading zeros) in `[lo, hi]`.
pub fn uint_range(lo: &str, hi: Option<&str>) -> Option<String> {
    if let Some(h) = hi {
        if cmp_uint(lo, h) == Ordering::Greater {
            return None;
        }
    }
    let l1 = lo.len();
    let nines = "9".repeat(l1);
    match hi {
        // No upper bound: at most MAX_INT_DIGITS digits (a sound narrowing
        // that keeps every integer inside i64 and parseable by any JSON reader).
        None if l1 < MAX_INT_DIGITS => alt(vec![
            Some(same_len(lo.as_bytes(), nines.as_bytes())),
            Some(format!("[1-9][0-9]{{{l1},{}}}", MAX_INT_DIGITS - 1)),
        ]),
        None if l1 == MAX_INT_DIGITS => Some(same_len(lo.as_bytes(), nines.as_bytes())),
        None => alt(vec![
            Some(same_len(lo.as_bytes(), nines.as_bytes())),
            Some(format!("[1-9][0-9]{{{l1},}}")),
        ]),
        Some(h) if h.len() == l1 => Some(same_len(lo.as_bytes(), h.as_bytes())),
        Some(h) => {
            let l2 = h.len();
            let mut parts = vec![Some(same_len(lo.as_bytes(), nines.as_bytes()))];
            if l2 - l1 >= 2 {
                let (a, b) = (l1, l2 - 2);
                parts.push(Some(if a == b {
                    format!("[1-9][0-9]{{{a}}}")
                } else {
                    format!("[1-9][0-9]{{{a},{b}}}")
                }));
            }
            let low = format!("1{}", "0".repeat(l2 - 1));
            parts.push(Some(same_len(low.as_bytes(), h.as_bytes())));
            alt(parts)
        }
    }
}

/// Canonical integers in `[lo, hi]` (integer bounds; `None` = unbounded).
pub fn int_range(lo: Option<&Dec>, hi: Option<&Dec>) -> Option<String> {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return None;
        }
    }
    let zero = Dec::zero();
    let mut parts = Vec::new();
    // Non-negative part.
    if hi.is_none_or(|h| *h >= zero) {
        let l = match lo {
            Some(l) if !l.neg => l.int.clone(),
            _ => "0".into(),
        };
        parts.push(uint_range(&l, hi.map(|h| h.int.as_str())));
    }
    // Negative part: magnitudes in [max(1, -hi), -lo].
    if lo.is_none_or(|l| l.neg) {
        let mlo = match hi {
            Some(h) if h.neg => h.int.clone(),
            _ => "1".into(),
        };
        let mhi = lo.map(|l| l.int.as_str());
        parts.push(uint_range(&mlo, mhi).map(|r| format!("-{r}")));
    }
    alt(parts)
}

/// Converts number bounds to the integer range `[ceil, floor]` they allow.
pub fn integer_bounds(lo: Option<&Bound>, hi: Option<&Bound>) -> (Option<Dec>, Option<Dec>) {
    let l = lo.map(|b| {
        if b.exclusive {
            b.value.floor().succ()
        } else {
            b.value.ceil()
        }
    });
    let h = hi.map(|b| {
        if b.exclusive {
            b.value.ceil().pred()
        } else {
            b.value.floor()
        }
    });
    (l, h)
}

const DIGITS: &str = "[0-9]*";

/// Fraction digit strings (missing digits count as zeros) F with F ≥ B (or
/// > B). `nonempty`: F has at least one digit.
fn frac_ge(b: &[u8], excl: bool, nonempty: bool) -> Option<String> {
    if b.is_empty() {
        return Some(match (excl, nonempty) {
            (true, _) => "[0-9]*[1-9][0-9]*".into(),
            (false, true) => "[0-9]+".into(),
            (false, false) => DIGITS.into(),
        });
    }
    let d = b[0];
    let mut parts = Vec::new();
    if d < b'9' {
        parts.push(Some(format!("{}{DIGITS}", digit_class(d + 1, b'9'))));
    }
    parts.push(frac_ge(&b[1..], excl, false).map(|r| format!("{}{r}", d as char)));
    alt(parts)
}

/// Fraction digit strings F with F ≤ D (or < D).
fn frac_le(d: &[u8], excl: bool, nonempty: bool) -> Option<String> {
    if d.is_empty() {
        return match (excl, nonempty) {
            (true, _) => None,
            (false, true) => Some("0+".into()),
            (false, false) => Some("0*".into()),
        };
    }
    let c = d[0];
    let mut parts = Vec::new();
    if !nonempty {
        parts.push(Some(String::new())); // F = "" is 0 < D
    }
    if c > b'0' {
        parts.push(Some(format!("{}{DIGITS}", digit_class(b'0', c - 1))));
    }
    parts.push(frac_le(&d[1..], excl, false).map(|r| format!("{}{r}", c as char)));
    alt(parts)
}

/// Fraction digit strings F with B ≤ F ≤ D (bounds per flags), B ≤ D.
fn frac_between(b: &[u8], exl: bool, d: &[u8], exh: bool, nonempty: bool) -> Option<String> {
    if b.is_empty() && d.is_empty() {
        return if exl || exh {
            None
        } else if nonempty {
            Some("0+".into())
        } else {
            Some("0*".into())
        };
    }
    if b.is_empty() && !exl {
        // F ≥ 0 always holds.
        return frac_le(d, exh, nonempty);
    }
    let bc = b.first().copied().unwrap_or(b'0');
    let dc = d.first().copied().unwrap_or(b'0');
    let brest = if b.is_empty() { &b[..] } else { &b[1..] };
    let drest = if d.is_empty() { &d[..] } else { &d[1..] };
    let mut parts = Vec::new();
    if bc == dc {
        parts.push(
            frac_between(brest, exl, drest, exh, false).map(|r| format!("{}{r}", bc as char)),
        );
    } else {
        parts.push(frac_ge(brest, exl, false).map(|r| format!("{}{r}", bc as char)));
        if bc + 1 < dc {
            parts.push(Some(format!("{}{DIGITS}", digit_class(bc + 1, dc - 1))));
        }
        parts.push(frac_le(drest, exh, false).map(|r| format!("{}{r}", dc as char)));
    }
    alt(parts)
}

/// Unsigned decimals `I(.F)?` with value in `[lo, hi]` (lo ≥ 0).
fn unsigned_decimal(lo: &Bound, hi: Option<&Bound>) -> Option<String> {
    let a = &lo.value;
    let frac_tail = |cond: Option<String>, zero_ok: bool| -> Option<String> {
        let mut parts = Vec::new();
        if zero_ok {
            parts.push(Some("(?:\\.0+)?".to_string()));
        }
        parts.push(cond.map(|c| format!("\\.{c}")));
        alt(parts)
    };
    let mut parts = Vec::new();
    match hi {
        None => {
            parts.push(uint_range(&add_one(&a.int), None).map(|r| format!("{r}(?:\\.[0-9]+)?")));
            let zero_ok = a.frac.is_empty() && !lo.exclusive;
            parts.push(
                frac_tail(frac_ge(a.frac.as_bytes(), lo.exclusive, true), zero_ok)
                    .map(|t| format!("{}{t}", a.int)),
            );
        }
        Some(h) => {
            let c = &h.value;
            match cmp_uint(&a.int, &c.int) {
                Ordering::Greater => return None,
                Ordering::Less => {
                    let a1 = add_one(&a.int);
                    let c1 = sub_one(&c.int);
                    if c.int != "0" && cmp_uint(&a1, &c1) != Ordering::Greater {
                        parts
                            .push(uint_range(&a1, Some(&c1)).map(|r| format!("{r}(?:\\.[0-9]+)?")));
                    }
                    let zero_ok = a.frac.is_empty() && !lo.exclusive;
                    parts.push(
                        frac_tail(frac_ge(a.frac.as_bytes(), lo.exclusive, true), zero_ok)
                            .map(|t| format!("{}{t}", a.int)),
                    );
                    let zero_ok = !(c.frac.is_empty() && h.exclusive);
                    parts.push(
                        frac_tail(frac_le(c.frac.as_bytes(), h.exclusive, true), zero_ok)
                            .map(|t| format!("{}{t}", c.int)),
                    );
                }
                Ordering::Equal => {
                    if a.abs_cmp(c) == Ordering::Greater {
                        return None;
                    }
                    let zero_ok =
                        a.frac.is_empty() && !lo.exclusive && !(c.frac.is_empty() && h.exclusive);
                    let cond = frac_between(
                        a.frac.as_bytes(),
                        lo.exclusive,
                        c.frac.as_bytes(),
                        h.exclusive,
                        true,
                    );
                    parts.push(frac_tail(cond, zero_ok).map(|t| format!("{}{t}", a.int)));
                }
            }
        }
    }
    alt(parts)
}

/// Any JSON number, exponent at most two digits (values stay in `f64` range).
pub fn number_any() -> String {
    format!(
        "-?(?:0|[1-9][0-9]{{0,{}}})(?:\\.[0-9]+)?{EXP}",
        MAX_INT_DIGITS - 1
    )
}

/// Most digits in an integer (or the integer part of a number) without an
/// upper bound from the schema: 18, so every integer fits an i64 and every
/// number stays far inside f64 (validators reading a 40-digit "integer" as a
/// float would reject it).
pub const MAX_INT_DIGITS: usize = 18;

/// Optional exponent, at most two digits.
pub const EXP: &str = "(?:[eE][+-]?[0-9]{1,2})?";

const NONZERO_MANTISSA: &str = "(?:[1-9][0-9]{0,17}(?:\\.[0-9]+)?|0\\.[0-9]*[1-9][0-9]*)";
const ZERO_MANTISSA: &str = "0(?:\\.0+)?";

/// JSON numbers (no exponent unless all finite bounds are zero) in the range.
/// `None`: the range is empty.
pub fn decimal_range(lo: Option<&Bound>, hi: Option<&Bound>) -> Option<String> {
    if let (Some(l), Some(h)) = (lo, hi) {
        match l.value.cmp(&h.value) {
            Ordering::Greater => return None,
            Ordering::Equal if l.exclusive || h.exclusive => return None,
            _ => {}
        }
    }
    let zero_bounds = lo.is_none_or(|b| b.value.is_zero()) && hi.is_none_or(|b| b.value.is_zero());
    if zero_bounds {
        return Some(match (lo, hi) {
            (None, None) => number_any(),
            (Some(l), None) => {
                if l.exclusive {
                    format!("{NONZERO_MANTISSA}{EXP}")
                } else {
                    format!("(?:{NONZERO_MANTISSA}|{ZERO_MANTISSA}){EXP}")
                }
            }
            (None, Some(h)) => {
                if h.exclusive {
                    format!("-{NONZERO_MANTISSA}{EXP}")
                } else {
                    format!("(?:-{NONZERO_MANTISSA}|{ZERO_MANTISSA}){EXP}")
                }
            }
            (Some(_), Some(_)) => format!("{ZERO_MANTISSA}{EXP}"),
        });
    }
    let zero = Dec::zero();
    let mut parts = Vec::new();
    // Non-negative values.
    if hi.is_none_or(|h| h.value > zero || (h.value.is_zero() && !h.exclusive)) {
        let l = match lo {
            Some(l) if !l.value.neg => l.clone(),
            _ => Bound {
                value: zero.clone(),
                exclusive: false,
            },
        };
        parts.push(unsigned_decimal(&l, hi));
    }
    // Negative values: "-" then a magnitude in [max(0, -hi), -lo], magnitude > 0.
    if lo.is_none_or(|l| l.value.neg) {
        let mlo = match hi {
            Some(h) if h.value.neg => Bound {
                value: h.value.negate(),
                exclusive: h.exclusive,
            },
            _ => Bound {
                value: zero.clone(),
                exclusive: true,
            },
        };
        let mhi = lo.map(|l| Bound {
            value: l.value.negate(),
            exclusive: l.exclusive,
        });
        parts.push(unsigned_decimal(&mlo, mhi.as_ref()).map(|r| format!("-{r}")));
    }
    alt(parts)
}

/// A regex for exactly the given strings (ASCII digits / safe text), shared
/// prefixes factored.
pub fn trie_regex(words: &[String]) -> String {
    fn go(words: &mut [&[u8]]) -> String {
        words.sort();
        let mut alts: Vec<String> = Vec::new();
        let mut has_empty = false;
        let mut i = 0;
        while i < words.len() {
            if words[i].is_empty() {
                has_empty = true;
                i += 1;
                continue;
            }
            let c = words[i][0];
            let mut j = i;
            while j < words.len() && !words[j].is_empty() && words[j][0] == c {
                j += 1;
            }
            let mut rest: Vec<&[u8]> = words[i..j].iter().map(|w| &w[1..]).collect();
            rest.dedup();
            let sub = go(&mut rest);
            alts.push(format!(
                "{}{}",
                regex_syntax::escape(&(c as char).to_string()),
                sub
            ));
            i = j;
        }
        let body = match alts.len() {
            0 => String::new(),
            1 => alts.pop().unwrap(),
            _ => format!("(?:{})", alts.join("|")),
        };
        if has_empty && !body.is_empty() {
            if alts_is_single_atom(&body) {
                format!("{body}?")
            } else {
                format!("(?:{body})?")
            }
        } else {
            body
        }
    }
    fn alts_is_single_atom(s: &str) -> bool {
        s.starts_with("(?:") && s.ends_with(')') && balanced_outer(s)
    }
    fn balanced_outer(s: &str) -> bool {
        let mut depth = 0;
        for (i, c) in s.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 && i != s.len() - 1 {
                        return false;
                    }
                }
                _ => {}
            }
        }
        true
    }
    let mut ws: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    ws.dedup();
    go(&mut ws)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(s: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{s})$")).unwrap()
    }

    #[test]
    fn dec_parses_and_orders() {
        let d = Dec::parse("-12.50e1").unwrap();
        assert_eq!(d.to_string(), "-125");
        assert_eq!(Dec::parse("1e-3").unwrap().to_string(), "0.001");
        assert!(Dec::parse("-0.5").unwrap() < Dec::parse("0").unwrap());
        assert!(Dec::parse("-2").unwrap() < Dec::parse("-1.5").unwrap());
        assert_eq!(Dec::parse("1.5").unwrap().floor().to_string(), "1");
        assert_eq!(Dec::parse("-1.5").unwrap().floor().to_string(), "-2");
        assert_eq!(Dec::parse("-1.5").unwrap().ceil().to_string(), "-1");
        assert_eq!(Dec::parse("-1").unwrap().succ().to_string(), "0");
        assert_eq!(Dec::parse("0").unwrap().pred().to_string(), "-1");
    }

    #[test]
    fn integer_ranges_are_exact() {
        let cases: &[(Option<i64>, Option<i64>)] = &[
            (Some(0), Some(0)),
            (Some(-5), Some(5)),
            (Some(18), Some(120)),
            (Some(7), Some(1234)),
            (Some(-1234), Some(-7)),
            (Some(99), None),
            (None, Some(-3)),
            (None, Some(42)),
            (Some(100), Some(199)),
            (Some(1), Some(65535)),
        ];
        for &(lo, hi) in cases {
            let l = lo.map(Dec::from_i64);
            let h = hi.map(Dec::from_i64);
            let r = re(&int_range(l.as_ref(), h.as_ref()).unwrap());
            for v in -3000i64..3000 {
                let want = lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
                assert_eq!(r.is_match(&v.to_string()), want, "{v} in {lo:?}..{hi:?}");
            }
            for bad in ["01", "-0", "+1", "1.0", ""] {
                assert!(!r.is_match(bad), "{bad} in {lo:?}..{hi:?}");
            }
        }
        assert!(int_range(Some(&Dec::from_i64(3)), Some(&Dec::from_i64(2))).is_none());
    }

    #[test]
    fn decimal_ranges_are_exact() {
        let bounds = [
            ("0", false, "1", false),
            ("0", true, "1", true),
            ("-1.5", false, "2.25", true),
            ("0.05", false, "0.5", false),
            ("-10", true, "-0.125", false),
            ("1.5", false, "1.75", false),
            ("3", false, "3", false),
        ];
        for (lo, le, hi, he) in bounds {
            let l = Bound {
                value: Dec::parse(lo).unwrap(),
                exclusive: le,
            };
            let h = Bound {
                value: Dec::parse(hi).unwrap(),
                exclusive: he,
            };
            let r = re(&decimal_range(Some(&l), Some(&h)).unwrap());
            let lv: f64 = lo.parse().unwrap();
            let hv: f64 = hi.parse().unwrap();
            for i in -1200..1200 {
                for text in [
                    format!("{}", i as f64 / 100.0),
                    format!("{:.3}", i as f64 / 100.0),
                    format!("{}", i / 100),
                ] {
                    let v: f64 = text.parse().unwrap();
                    let want =
                        (if le { v > lv } else { v >= lv }) && (if he { v < hv } else { v <= hv });
                    let canonical = !text.starts_with("-0") || v != 0.0;
                    if canonical {
                        assert_eq!(r.is_match(&text), want, "{text} in {lo}({le})..{hi}({he})");
                    } else if r.is_match(&text) {
                        assert!(want, "{text}");
                    }
                }
            }
        }
    }
}

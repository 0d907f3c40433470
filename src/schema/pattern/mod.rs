//! # `pattern`: ECMA-262 regexes inside JSON strings
//!
//! A JSON Schema `pattern` is an ECMA-262 regex matched *anywhere* in the
//! decoded string unless anchored. Turning it into part of a document regex
//! takes four steps:
//!
//! 1. [`translate_ecma`]: rewrite ECMA syntax into regex-crate syntax. `\d`,
//!    `\w` (and their negations) mean ASCII, `\s` the ECMA whitespace set, `.`
//!    excludes the four ECMA line terminators; identity escapes (`\/`, `\-`,
//!    `\<`) become literals; backreferences and word boundaries are errors
//!    (the regex engine cannot do them; the error names the pointer).
//!    Lookaheads right after a leading `^` and lookbehinds right before a
//!    trailing `$` (`^(?!foo$).*$`, `^.*(?<!\.tmp)$`) keep the language
//!    regular and are compiled exactly by product automata
//!    (`lookaround`: intersection for positive ones, difference for
//!    negative ones); lookaround anywhere else is an error.
//! 2. Anchoring: the parsed pattern is split into alternatives, each anchored
//!    or not at either end; an unanchored side gets "any characters".
//!    Anchors anywhere else are an error.
//! 3. Lengths (`minLength`/`maxLength` on the same schema): kept when the
//!    pattern already implies them; otherwise applied exactly when the pattern
//!    has one variable-length piece (the usual `^[a-z]+$` shape), by
//!    expansion when an unanchored pattern is fixed-width, and otherwise by
//!    *narrowing* the pattern's open repetitions until its longest match fits
//!    `maxLength` (sound, reported as a warning).
//! 4. Emission: every character class is mapped to JSON string text: plain
//!    characters stay, `"` and `\` become `\"` and `\\`, control characters
//!    their canonical escapes. The result can never run past the closing quote.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition};

mod lookaround;
pub use lookaround::{is_match, KeyMatcher};

mod emit;
mod translate;
use emit::{emit, emit_alt};
pub use translate::{translate_ecma, PatternError};

/// Parses a translated pattern into an HIR.
pub fn parse(translated: &str) -> Result<Hir, PatternError> {
    regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .parse(translated)
        .map_err(|e| match e {
            regex_syntax::Error::Parse(e) => e.kind().to_string(),
            regex_syntax::Error::Translate(e) => e.kind().to_string(),
            e => e.to_string(),
        })
}

/// One alternative of a pattern with its anchors peeled off.
struct Anchored {
    start: bool,
    end: bool,
    body: Hir,
}

fn has_look(h: &Hir) -> bool {
    h.properties().look_set().iter().next().is_some()
}

fn split_anchors(h: &Hir, out: &mut Vec<Anchored>) -> Result<(), PatternError> {
    out.extend(anchor_alts(h)?);
    Ok(())
}

const ANCHOR_ERR: &str =
    "assertions other than ^ and $ (or anchors inside repetitions) are not supported";

/// The pattern as alternatives (anchored at start?, anchored at end?, body
/// without assertions). A `$` followed by something that can only match the
/// empty string keeps only that empty match, and so on.
fn anchor_alts(h: &Hir) -> Result<Vec<Anchored>, PatternError> {
    let plain = |h: &Hir| Anchored {
        start: false,
        end: false,
        body: h.clone(),
    };
    if !has_look(h) {
        return Ok(vec![plain(h)]);
    }
    match h.kind() {
        HirKind::Look(Look::Start) => Ok(vec![Anchored {
            start: true,
            end: false,
            body: Hir::empty(),
        }]),
        HirKind::Look(Look::End) => Ok(vec![Anchored {
            start: false,
            end: true,
            body: Hir::empty(),
        }]),
        HirKind::Capture(c) => anchor_alts(&c.sub),
        HirKind::Alternation(v) => {
            let mut out = Vec::new();
            for b in v {
                out.extend(anchor_alts(b)?);
            }
            Ok(out)
        }
        HirKind::Concat(v) => {
            let mut acc = vec![Anchored {
                start: false,
                end: false,
                body: Hir::empty(),
            }];
            for item in v {
                let next = anchor_alts(item)?;
                let mut combined = Vec::new();
                for a in &acc {
                    for b in &next {
                        let nullable = |h: &Hir| char_len(h).0 == 0;
                        let (b1, start) = if b.start {
                            if !nullable(&a.body) {
                                continue;
                            }
                            (Hir::empty(), true)
                        } else {
                            (a.body.clone(), a.start)
                        };
                        let (b2, end) = if a.end {
                            if !nullable(&b.body) {
                                continue;
                            }
                            (Hir::empty(), true)
                        } else {
                            (b.body.clone(), b.end)
                        };
                        combined.push(Anchored {
                            start,
                            end: end || (b.end && !a.end),
                            body: Hir::concat(vec![b1, b2]),
                        });
                    }
                }
                if combined.len() > 64 {
                    return Err("too many anchored alternatives in the pattern".into());
                }
                acc = combined;
            }
            Ok(acc)
        }
        _ => Err(ANCHOR_ERR.into()),
    }
}

fn any_char() -> Hir {
    Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new(
        '\0',
        char::MAX,
    )])))
}

fn any_star() -> Hir {
    Hir::repetition(Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(any_char()),
    })
}

/// Length of the matches of an HIR in characters: (min, max or unbounded).
pub fn char_len(h: &Hir) -> (u64, Option<u64>) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(l) => {
            let n = String::from_utf8_lossy(&l.0).chars().count() as u64;
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Capture(c) => char_len(&c.sub),
        HirKind::Repetition(r) => {
            let (a, b) = char_len(&r.sub);
            let min = a.saturating_mul(r.min as u64);
            let max = match (b, r.max) {
                (Some(0), _) => Some(0),
                (Some(b), Some(m)) => Some(b.saturating_mul(m as u64)),
                _ => None,
            };
            (min, max)
        }
        HirKind::Concat(v) => v.iter().fold((0, Some(0)), |(a, b), h| {
            let (c, d) = char_len(h);
            (
                a.saturating_add(c),
                b.zip(d).map(|(x, y)| x.saturating_add(y)),
            )
        }),
        HirKind::Alternation(v) => {
            let mut min = u64::MAX;
            let mut max = Some(0u64);
            for h in v {
                let (a, b) = char_len(h);
                min = min.min(a);
                max = max.zip(b).map(|(x, y)| x.max(y));
            }
            (if v.is_empty() { 0 } else { min }, max)
        }
    }
}

fn implied(h: &Hir, lo: u64, hi: Option<u64>) -> bool {
    let (a, b) = char_len(h);
    a >= lo
        && match hi {
            None => true,
            Some(m) => b.is_some_and(|b| b <= m),
        }
}

fn disjoint(h: &Hir, lo: u64, hi: Option<u64>) -> bool {
    let (a, b) = char_len(h);
    hi.is_some_and(|m| a > m) || b.is_some_and(|b| b < lo)
}

/// Exact restriction of `h` to matches with length in `[lo, hi]`, when `h`
/// has at most one variable-length piece on every path. `None`: not exact.
fn restrict(h: &Hir, lo: u64, hi: Option<u64>) -> Option<Hir> {
    if implied(h, lo, hi) {
        return Some(h.clone());
    }
    if disjoint(h, lo, hi) {
        return Some(Hir::fail());
    }
    match h.kind() {
        HirKind::Capture(c) => restrict(&c.sub, lo, hi),
        HirKind::Alternation(v) => {
            let parts: Option<Vec<Hir>> = v.iter().map(|b| restrict(b, lo, hi)).collect();
            Some(Hir::alternation(parts?))
        }
        HirKind::Concat(v) => {
            let fixed = |h: &Hir| {
                let (a, b) = char_len(h);
                b == Some(a)
            };
            let var: Vec<usize> = (0..v.len()).filter(|&i| !fixed(&v[i])).collect();
            if var.len() != 1 {
                return None;
            }
            let f: u64 = v.iter().filter(|h| fixed(h)).map(|h| char_len(h).0).sum();
            let j = var[0];
            if hi.is_some_and(|m| m < f) {
                return Some(Hir::fail());
            }
            let sub = restrict(&v[j], lo.saturating_sub(f), hi.map(|m| m - f))?;
            let mut items = v.clone();
            items[j] = sub;
            Some(Hir::concat(items))
        }
        HirKind::Repetition(r) => {
            let (a, b) = char_len(&r.sub);
            if b != Some(a) || a == 0 {
                return None;
            }
            let w = a;
            let nmin = (lo.div_ceil(w)).max(r.min as u64);
            let nmax = match (hi.map(|m| m / w), r.max.map(|m| m as u64)) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (Some(x), None) => Some(x),
                (None, y) => y,
            };
            if nmax.is_some_and(|m| m < nmin) {
                return Some(Hir::fail());
            }
            Some(Hir::repetition(Repetition {
                min: nmin.min(u32::MAX as u64) as u32,
                max: nmax.map(|m| m.min(u32::MAX as u64) as u32),
                greedy: true,
                sub: r.sub.clone(),
            }))
        }
        _ => None,
    }
}

/// Exactly the non-empty matches of `h` (`minLength: 1`), by structure:
/// `ne(a·rest) = ne(a)·rest | ne(rest)` when `a` can be empty,
/// `ne(x{m,n}) = ne(x)·x{m-1,n-1}`. `None`: a shape it does not handle
/// (look-around assertions inside a concatenation).
fn nonempty(h: &Hir) -> Option<Hir> {
    if char_len(h).0 >= 1 {
        return Some(h.clone());
    }
    match h.kind() {
        HirKind::Empty => Some(Hir::fail()),
        HirKind::Look(_) => None,
        HirKind::Capture(c) => nonempty(&c.sub),
        HirKind::Alternation(v) => {
            let parts: Option<Vec<Hir>> = v.iter().map(nonempty).collect();
            Some(Hir::alternation(parts?))
        }
        HirKind::Concat(v) => {
            let (first, rest) = v.split_first()?;
            if matches!(first.kind(), HirKind::Look(_)) {
                return None;
            }
            let rest = Hir::concat(rest.to_vec());
            let mut alts = vec![Hir::concat(vec![nonempty(first)?, rest.clone()])];
            // `first` can be empty here (its shortest match is empty).
            alts.push(nonempty(&rest)?);
            Some(Hir::alternation(alts))
        }
        HirKind::Repetition(r) => {
            if r.max == Some(0) {
                return Some(Hir::fail());
            }
            Some(Hir::concat(vec![
                nonempty(&r.sub)?,
                rep(
                    (*r.sub).clone(),
                    r.min.saturating_sub(1),
                    r.max.map(|m| m - 1),
                ),
            ]))
        }
        _ => None,
    }
}

/// Caps every open or large repetition at `cap` (keeping its minimum).
fn cap_reps(h: &Hir, cap: u32) -> Hir {
    match h.kind() {
        HirKind::Capture(c) => cap_reps(&c.sub, cap),
        HirKind::Alternation(v) => Hir::alternation(v.iter().map(|b| cap_reps(b, cap)).collect()),
        HirKind::Concat(v) => Hir::concat(v.iter().map(|b| cap_reps(b, cap)).collect()),
        HirKind::Repetition(r) => {
            let max = Some(r.max.map_or(cap, |m| m.min(cap)).max(r.min));
            Hir::repetition(Repetition {
                min: r.min,
                max,
                greedy: true,
                sub: Box::new(cap_reps(&r.sub, cap)),
            })
        }
        _ => h.clone(),
    }
}

/// The outcome of compiling a pattern.
#[derive(Clone)]
pub struct CompiledPattern {
    /// Regex for the inside of the JSON string; `None`: no string qualifies.
    pub regex: Option<String>,
    /// Set when a length bound was applied by narrowing (a warning).
    pub narrowed: Option<String>,
}

/// Compiles `pattern` (ECMA-262) with optional length bounds into a regex for
/// the inside of a JSON string.
pub fn compile_pattern(
    pattern: &str,
    min_len: u64,
    max_len: Option<u64>,
) -> Result<CompiledPattern, PatternError> {
    if let Some(split) = lookaround::split_lookaround(pattern) {
        return lookaround::compile_lookaround(&split, min_len, max_len);
    }
    let translated = translate_ecma(pattern)?;
    let hir = parse(&translated)?;
    let mut alts = Vec::new();
    split_anchors(&hir, &mut alts)?;
    with_lengths(alts, min_len, max_len)
}

/// Applies length bounds to a whole-string regex in regex-crate syntax (a
/// format), the same way as for patterns.
pub fn restrict_regex(
    regex: &str,
    min_len: u64,
    max_len: Option<u64>,
) -> Result<CompiledPattern, PatternError> {
    let hir = parse(regex)?;
    let alts = vec![Anchored {
        start: true,
        end: true,
        body: hir,
    }];
    with_lengths(alts, min_len, max_len)
}

fn with_lengths(
    alts: Vec<Anchored>,
    min_len: u64,
    max_len: Option<u64>,
) -> Result<CompiledPattern, PatternError> {
    let mut out = Vec::new();
    let mut products: Vec<String> = Vec::new();
    let mut narrowed = None;
    for a in alts {
        let mut items = Vec::new();
        if !a.start {
            items.push(any_star());
        }
        items.push(a.body.clone());
        if !a.end {
            items.push(any_star());
        }
        let full = Hir::concat(items);
        if min_len == 0 && max_len.is_none() {
            out.push(full);
            continue;
        }
        if let Some(r) = restrict(&full, min_len, max_len) {
            out.push(r);
            continue;
        }
        // Unanchored fixed-width body: enumerate where it sits.
        let (bw, bmax) = char_len(&a.body);
        if let (Some(m), true) = (max_len, bmax == Some(bw)) {
            if m >= bw && m - bw <= 32 {
                let slack = m - bw;
                let mut opts = Vec::new();
                for p in 0..=slack {
                    if a.start && p > 0 {
                        break;
                    }
                    let lo_s = min_len.saturating_sub(bw).saturating_sub(p);
                    let hi_s = slack - p;
                    if a.end && (lo_s > 0) {
                        continue;
                    }
                    let suf_hi = if a.end { 0 } else { hi_s };
                    if lo_s > suf_hi {
                        continue;
                    }
                    opts.push(Hir::concat(vec![
                        rep(any_char(), p as u32, Some(p as u32)),
                        a.body.clone(),
                        rep(any_char(), lo_s as u32, Some(suf_hi as u32)),
                    ]));
                }
                out.push(Hir::alternation(opts));
                continue;
            }
        }
        // Narrow: cap open repetitions until the longest match fits.
        let Some(m) = max_len else {
            if min_len == 1 {
                if let Some(h) = nonempty(&full) {
                    out.push(h);
                    continue;
                }
            }
            exact_or_narrowed(&full, &a, min_len, max_len)?.apply(
                &mut out,
                &mut products,
                &mut narrowed,
            );
            continue;
        };
        let mut lo_c = 0u32;
        let mut hi_c = m.min(u32::MAX as u64) as u32;
        let fits = |c: u32| char_len(&cap_reps(&full, c)).1.is_some_and(|x| x <= m);
        if !fits(0) {
            // No capping fits: the exact product.
            exact_or_narrowed(&full, &a, min_len, max_len)?.apply(
                &mut out,
                &mut products,
                &mut narrowed,
            );
            continue;
        }
        while lo_c < hi_c {
            let mid = lo_c + (hi_c - lo_c).div_ceil(2);
            if fits(mid) {
                lo_c = mid;
            } else {
                hi_c = mid - 1;
            }
        }
        let capped = cap_reps(&full, lo_c);
        if char_len(&capped).0 < min_len {
            match restrict(&capped, min_len, Some(m)) {
                Some(r) => out.push(r),
                None => {
                    // Exact when the product is built: nothing is narrowed.
                    exact_or_narrowed(&full, &a, min_len, max_len)?.apply(
                        &mut out,
                        &mut products,
                        &mut narrowed,
                    );
                    continue;
                }
            }
        } else {
            out.push(capped);
        }
        narrowed = Some(format!(
            "maxLength {m} with pattern narrowed: open repetitions capped at {lo_c}"
        ));
    }
    let mut parts: Vec<String> = emit_alt(&out).into_iter().collect();
    parts.extend(products);
    let regex = match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(format!("(?:{})", parts.join("|"))),
    };
    Ok(CompiledPattern { regex, narrowed })
}

/// What [`exact_or_narrowed`] settled on for one alternative.
enum Fallback {
    /// The exact product of the pattern and the lengths (`None`: empty).
    Product(Option<String>),
    /// A sound narrowing, and the warning saying so.
    Narrowed(Hir, String),
}

impl Fallback {
    /// Adds the alternative to the products, or to the narrowed parts.
    fn apply(self, out: &mut Vec<Hir>, products: &mut Vec<String>, narrowed: &mut Option<String>) {
        match self {
            Fallback::Product(r) => products.extend(r),
            Fallback::Narrowed(r, why) => {
                out.push(r);
                *narrowed = Some(why);
            }
        }
    }
}

/// The last resort for one alternative with length bounds: the exact
/// [`length_product`], else an [`anchored_narrowing`], else the error.
fn exact_or_narrowed(
    full: &Hir,
    a: &Anchored,
    min_len: u64,
    max_len: Option<u64>,
) -> Result<Fallback, String> {
    if let Some(r) = length_product(full, min_len, max_len) {
        return Ok(Fallback::Product(r));
    }
    match anchored_narrowing(a, min_len, max_len) {
        Some((r, why)) => Ok(Fallback::Narrowed(r, why)),
        None => Err(format!(
            "minLength {min_len}{} together with this pattern cannot be compiled exactly",
            max_len
                .map(|m| format!(" and maxLength {m}"))
                .unwrap_or_default()
        )),
    }
}

/// A sound narrowing for an alternative unanchored on a side: the strings
/// that the body matches whole (each matches the pattern), within the
/// lengths when [`restrict`] can apply them exactly to the body.
fn anchored_narrowing(a: &Anchored, min: u64, max: Option<u64>) -> Option<(Hir, String)> {
    if a.start && a.end {
        return None;
    }
    let r = restrict(&a.body, min, max).or_else(|| {
        // Several open pieces: all but one at their fewest repetitions,
        // the remaining one takes the lengths.
        let HirKind::Concat(parts) = a.body.kind() else {
            return None;
        };
        let shortest = |h: &Hir| match h.kind() {
            HirKind::Repetition(r) => Some(rep((*r.sub).clone(), r.min, Some(r.min))),
            _ => None,
        };
        (0..parts.len()).find_map(|keep| {
            let (lo, hi) = char_len(&parts[keep]);
            if hi == Some(lo) {
                return None;
            }
            let fixed: Vec<Hir> = parts
                .iter()
                .enumerate()
                .map(|(i, p)| match (i == keep, char_len(p)) {
                    (false, (l, Some(h))) if l == h => Some(p.clone()),
                    (false, _) => shortest(p),
                    (true, _) => Some(p.clone()),
                })
                .collect::<Option<Vec<Hir>>>()?;
            restrict(&Hir::concat(fixed), min, max)
        })
    })?;
    Some((
        r,
        format!(
            "minLength {min}{} with an unanchored pattern narrowed: the match is the whole string",
            max.map(|m| format!(" and maxLength {m}"))
                .unwrap_or_default()
        ),
    ))
}

/// The spelled strings of `full` whose length in characters lies in
/// `[min, max]`, through a product automaton (bounded by the default
/// `max_product_states` / `max_product_len`). `None`: the product is over
/// those bounds; `Some(None)`: no string qualifies.
fn length_product(full: &Hir, min: u64, max: Option<u64>) -> Option<Option<String>> {
    if max.is_some_and(|m| m > 10_000) || min > 10_000 {
        return None;
    }
    let Some(text) = emit(full) else {
        return Some(None);
    };
    // One character in any JSON spelling; `full` fixes the spelling.
    let unit = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;
    let count = match max {
        Some(m) if m == min => format!("{{{min}}}"),
        Some(m) => format!("{{{min},{m}}}"),
        None => format!("{{{min},}}"),
    };
    let lengths = format!("{unit}{count}");
    let defaults = crate::schema::SchemaOptions::default();
    crate::dfa::algebra::combine(
        &text,
        &lengths,
        crate::dfa::algebra::Op::And,
        defaults.max_product_states,
        defaults.max_product_len,
    )
    .ok()
}

fn rep(h: Hir, min: u32, max: Option<u32>) -> Hir {
    Hir::repetition(Repetition {
        min,
        max,
        greedy: true,
        sub: Box::new(h),
    })
}

#[cfg(test)]
mod tests;

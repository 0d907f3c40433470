//! Random structural tags against a reference interpreter.
//!
//! [`random_tag`] builds a small structural tag from bytes (depth ≤ 3:
//! `const_string`, `regex`, `any_text` with `excludes`, `sequence`, `or`,
//! `optional`, `star`, `plus`, `repeat`, `tag`; `any_text` only where its
//! end is unambiguous: as a tag's whole content, or as the whole tag), and
//! [`check_tag_case`] compiles it over a byte-complete vocabulary and holds
//! the compiled matcher to [`Reference`], a direct interpreter of the same
//! tree written here from XGrammar's documented semantics (free text holds
//! none of its `excludes` and none of the enclosing tag's `end`):
//!
//! * a text is accepted by the matcher exactly when the interpreter accepts
//!   it (sampled texts and their mutations);
//! * on walks steered by the case's choices, the mask is never empty, EOS
//!   is allowed exactly where the interpreter accepts the text so far, and
//!   every allowed token leaves a state from which a walk reaches EOS.

use super::*;
use constrain::tags::StructuralTag;
use constrain::{Compiler, CompilerConfig, Source};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The alphabet of texts and markers.
pub const TAG_POOL: [char; 6] = ['a', 'b', '<', '>', '/', 'x'];

const STRINGS: [&str; 6] = ["a", "ab", "<a>", "</a>", "x", "b/"];
const REGEXES: [&str; 4] = ["a+", "(ab|b)x?", "[ab]{1,3}", "x|<"];
const MARKERS: [(&str, &str); 3] = [("<a>", "</a>"), ("<b>", "</b>"), ("x<", ">")];

/// One fuzz case: the tag's JSON, texts to judge, walk choices.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TagCase {
    /// The structural tag, as JSON.
    pub tag: Value,
    /// Texts to judge against the reference (the first 16 are used).
    pub texts: Vec<String>,
    /// Seed of the texts sampled from the tag and their mutations.
    pub seed: u64,
    /// Picks among the allowed tokens on the steered walks (cycled).
    pub choices: Vec<u8>,
}

/// A random tag from `bytes`.
pub fn random_tag(bytes: &[u8]) -> Value {
    let mut it = bytes.iter().copied().chain(std::iter::repeat(0));
    let f = gen(&mut it, 3, true);
    json!({"type": "structural_tag", "format": f})
}

fn gen(it: &mut impl Iterator<Item = u8>, depth: u32, top: bool) -> Value {
    let mut b = || it.next().unwrap_or(0);
    let kind = if depth == 0 { b() % 3 } else { b() % 10 };
    match kind {
        0 => json!({"type": "const_string", "value": STRINGS[b() as usize % STRINGS.len()]}),
        1 => json!({"type": "regex", "pattern": REGEXES[b() as usize % REGEXES.len()]}),
        2 if top => {
            let ex: Vec<&str> = STRINGS
                .iter()
                .copied()
                .filter(|_| b() % 4 == 0)
                .take(2)
                .collect();
            json!({"type": "any_text", "excludes": ex})
        }
        2 => json!({"type": "const_string", "value": "b"}),
        3 | 4 => {
            let n = 1 + b() % 3;
            let els: Vec<Value> = (0..n).map(|_| gen(it, depth - 1, false)).collect();
            json!({"type": "sequence", "elements": els})
        }
        5 => {
            let n = 2 + b() % 2;
            let els: Vec<Value> = (0..n).map(|_| gen(it, depth - 1, false)).collect();
            json!({"type": "or", "elements": els})
        }
        6 => {
            let which = ["optional", "star", "plus"][b() as usize % 3];
            json!({"type": which, "content": gen(it, depth - 1, false)})
        }
        7 => {
            let min = b() % 2;
            let max = min + b() % 3;
            json!({"type": "repeat", "min": min, "max": max, "content": gen(it, depth - 1, false)})
        }
        _ => {
            let (begin, end) = MARKERS[b() as usize % MARKERS.len()];
            let content = if b() % 3 == 0 {
                let ex: Vec<&str> = STRINGS
                    .iter()
                    .copied()
                    .filter(|_| b() % 5 == 0)
                    .take(1)
                    .collect();
                json!({"type": "any_text", "excludes": ex})
            } else {
                gen(it, depth - 1, false)
            };
            json!({"type": "tag", "begin": begin, "content": content, "end": end})
        }
    }
}

/// The reference interpreter: the end positions of `f` matched in `text`
/// from `i`, with `stop` the enclosing tag's end (for free text).
pub struct Reference;

impl Reference {
    /// Whether `text` is a complete output of the tag `tag` (its JSON).
    pub fn accepts(tag: &Value, text: &str) -> bool {
        Self::ends(&tag["format"], text, 0, &[]).contains(&text.len())
    }

    fn ends(f: &Value, text: &str, i: usize, stop: &[&str]) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
        match f["type"].as_str().unwrap_or_default() {
            "const_string" => {
                let v = s("value");
                if text[i..].starts_with(&v) {
                    out.insert(i + v.len());
                }
            }
            "regex" => {
                let re = regex_automata::meta::Regex::new(&format!("^(?:{})$", s("pattern")))
                    .expect("pool regex");
                for j in i..=text.len() {
                    if text.is_char_boundary(j) && re.is_match(&text[i..j]) {
                        out.insert(j);
                    }
                }
            }
            "any_text" => {
                let mut stops: Vec<String> = f["excludes"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                stops.extend(stop.iter().map(|x| x.to_string()));
                for j in i..=text.len() {
                    if text.is_char_boundary(j)
                        && !stops.iter().any(|x| text[i..j].contains(x.as_str()))
                    {
                        out.insert(j);
                    }
                }
            }
            "sequence" => {
                let mut at: BTreeSet<usize> = [i].into();
                for e in f["elements"].as_array().into_iter().flatten() {
                    at = at
                        .iter()
                        .flat_map(|&p| Self::ends(e, text, p, stop))
                        .collect();
                }
                out = at;
            }
            "or" => {
                for e in f["elements"].as_array().into_iter().flatten() {
                    out.extend(Self::ends(e, text, i, stop));
                }
            }
            "optional" => {
                out.insert(i);
                out.extend(Self::ends(&f["content"], text, i, stop));
            }
            "star" | "plus" | "repeat" => {
                let (min, max) = match f["type"].as_str() {
                    Some("star") => (0, usize::MAX),
                    Some("plus") => (1, usize::MAX),
                    _ => (
                        f["min"].as_u64().unwrap_or(0) as usize,
                        f["max"].as_u64().map_or(usize::MAX, |m| m as usize),
                    ),
                };
                // (position, repetitions so far), repetitions capped at min.
                let mut seen: BTreeSet<(usize, usize)> = BTreeSet::new();
                let mut todo = vec![(i, 0usize)];
                while let Some((p, n)) = todo.pop() {
                    if !seen.insert((p, n)) {
                        continue;
                    }
                    if n >= min {
                        out.insert(p);
                    }
                    if n < max {
                        for q in Self::ends(&f["content"], text, p, stop) {
                            // An empty repetition adds nothing new.
                            if q > p || n < min {
                                let m = if max == usize::MAX {
                                    (n + 1).min(min)
                                } else {
                                    n + 1
                                };
                                todo.push((q, m));
                            }
                        }
                    }
                }
            }
            "tag" => {
                let (begin, end) = (s("begin"), s("end"));
                if text[i..].starts_with(&begin) {
                    for p in Self::ends(&f["content"], text, i + begin.len(), &[end.as_str()]) {
                        if text[p..].starts_with(&end) {
                            out.insert(p + end.len());
                        }
                    }
                }
            }
            _ => {}
        }
        out
    }

    /// A text of the tag, sampled (depth-bounded choices).
    pub fn sample(f: &Value, rng: &mut StdRng, stop: &[&str], out: &mut String) {
        let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
        match f["type"].as_str().unwrap_or_default() {
            "const_string" => out.push_str(&s("value")),
            "regex" => {
                let picks: &[&str] = match s("pattern").as_str() {
                    "a+" => &["a", "aa"],
                    "(ab|b)x?" => &["ab", "bx", "abx"],
                    "[ab]{1,3}" => &["a", "bab"],
                    _ => &["x", "<"],
                };
                out.push_str(picks[rng.random_range(0..picks.len())]);
            }
            "any_text" => {
                for _ in 0..rng.random_range(0..5) {
                    out.push(TAG_POOL[rng.random_range(0..TAG_POOL.len())]);
                }
            }
            "sequence" => {
                for e in f["elements"].as_array().into_iter().flatten() {
                    Self::sample(e, rng, stop, out);
                }
            }
            "or" => {
                let els = f["elements"].as_array().cloned().unwrap_or_default();
                if !els.is_empty() {
                    Self::sample(&els[rng.random_range(0..els.len())], rng, stop, out);
                }
            }
            "optional" | "star" | "plus" | "repeat" => {
                let min = match f["type"].as_str() {
                    Some("plus") => 1,
                    Some("repeat") => f["min"].as_u64().unwrap_or(0) as usize,
                    _ => 0,
                };
                let max = match f["type"].as_str() {
                    Some("optional") => 1,
                    Some("repeat") => f["max"].as_u64().unwrap_or(1) as usize,
                    _ => min + 2,
                };
                for _ in 0..rng.random_range(min..=max.max(min)) {
                    Self::sample(&f["content"], rng, stop, out);
                }
            }
            "tag" => {
                out.push_str(&s("begin"));
                let end = s("end");
                Self::sample(&f["content"], rng, &[end.as_str()], out);
                out.push_str(&end);
            }
            _ => {}
        }
    }
}

/// Checks `case` (see the module's invariants). `Ok(false)`: the tag was
/// refused (a typed error), nothing to check.
pub fn check_tag_case(case: &TagCase) -> Result<bool, Violation> {
    let tag = match StructuralTag::from_json(&case.tag) {
        Ok(t) => t,
        Err(_) => return Ok(false),
    };
    let toks: Vec<(TokenId, Vec<u8>)> = (0..=255u8)
        .map(|b| (TokenId(b as u32), vec![b]))
        .chain(
            ["<a", "</", "a>", "ab", "x<"]
                .iter()
                .enumerate()
                .map(|(k, t)| (TokenId(256 + k as u32), t.as_bytes().to_vec())),
        )
        .collect();
    let eos = TokenId(toks.len() as u32);
    let vocab = Arc::new(Vocabulary::new(toks, [eos], eos.0 as usize + 1).expect("vocabulary"));
    let config = CompilerConfig::default()
        .dfa(fuzz_dfa_config())
        .cache_entries(0);
    let source = Source::StructuralTag {
        tag,
        options: StructuralTag::schema_options(),
    };
    let compiled = match Compiler::new(vocab.clone(), config).compile(&source) {
        Ok(c) => c,
        Err(_) => return Ok(false),
    };
    let mut rng = StdRng::seed_from_u64(case.seed);
    let mut texts: Vec<String> = case.texts.iter().take(16).cloned().collect();
    for _ in 0..12 {
        let mut t = String::new();
        Reference::sample(&case.tag["format"], &mut rng, &[], &mut t);
        // A mutation beside each sample.
        let mut m: Vec<char> = t.chars().collect();
        if !m.is_empty() {
            let k = rng.random_range(0..m.len());
            match rng.random_range(0..3) {
                0 => {
                    m.remove(k);
                }
                1 => m.insert(k, TAG_POOL[rng.random_range(0..TAG_POOL.len())]),
                _ => m[k] = TAG_POOL[rng.random_range(0..TAG_POOL.len())],
            }
        }
        texts.push(t);
        texts.push(m.into_iter().collect());
    }
    for t in &texts {
        let mut m = compiled.matcher();
        let walked = t.bytes().all(|b| m.accept_token(TokenId(b as u32)));
        let matcher = walked && m.is_accepting();
        let reference = Reference::accepts(&case.tag, t);
        if matcher != reference {
            return fail(
                format!("text {t:?}: the matcher says {matcher}, the reference {reference}"),
                t.as_bytes(),
            );
        }
    }
    // Walks steered by the choices.
    let mut choices = case.choices.iter().copied().cycle().take(256);
    for _ in 0..3 {
        let mut m = compiled.matcher();
        let mut text = Vec::new();
        for _ in 0..40 {
            let allowed: Vec<TokenId> = m.allowed().iter().collect();
            if allowed.is_empty() {
                return fail("an empty mask", &text);
            }
            // Text cut inside a UTF-8 character is never complete.
            let complete =
                std::str::from_utf8(&text).is_ok_and(|s| Reference::accepts(&case.tag, s));
            let eos_ok = allowed.contains(&eos);
            if eos_ok != complete {
                return fail(
                    format!("EOS allowed {eos_ok}, the reference accepts {}", !eos_ok),
                    &text,
                );
            }
            let pick = allowed[choices.next().unwrap_or(0) as usize % allowed.len()];
            if pick == eos {
                break;
            }
            if !m.accept_token(pick) {
                return fail(format!("allowed token {pick:?} refused"), &text);
            }
            text.extend_from_slice(vocab.token_bytes(pick).unwrap_or_default());
        }
        // Every prefix a walk reached can still be completed.
        if !m.is_accepting() {
            let need = m.tokens_to_accept();
            if need.is_none() {
                return fail("no completion from a reached state", &text);
            }
        }
    }
    Ok(true)
}

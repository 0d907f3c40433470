//! Conformance with llguidance's own Lark tests: the grammars, texts and
//! verdicts of its `parser/tests/test_lark.rs`, taken as data into
//! `tests/lark/llguidance-cases.json` (`scripts/llguidance-lark-cases.py`
//! writes it from that file).
//!
//! Checked byte by byte over a vocabulary of single bytes (so the verdicts
//! are about texts, not one tokenizer's splits):
//!
//! * no wrong accept: a text llguidance refuses is never a complete text
//!   here, and a `FINAL_REJECT` text is never complete either;
//! * a grammar llguidance refuses is refused, with a message, unless it is
//!   `start: %json S` for a valid JSON Schema `S` that llguidance does not
//!   support (`if`, overlapping `patternProperties`, ...): constrain's JSON
//!   Schema compiler is exact there, and such cases are listed apart;
//! * the share of grammars llguidance compiles that compile here, and of
//!   the texts it accepts that are accepted here, stays at or above the
//!   figures below (printed for Lark and `%json` cases apart, with the
//!   cases that fall short and why). Grammars naming token ids are left
//!   out of the figures: the ids are those of llguidance's test tokenizer.

use constrain::vocab::Vocabulary;
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::{byte_verdict as verdict, bytes_and};
use serde_json::Value;
use std::sync::Arc;

/// Grammars llguidance compiles that compile here: at least this share.
const MIN_COMPILED: f64 = 0.95;
/// Texts llguidance accepts that are accepted here: at least this share.
const MIN_ACCEPTED: f64 = 0.97;

fn cases() -> Vec<Value> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lark/llguidance-cases.json");
    let text = std::fs::read_to_string(path).expect("llguidance-cases.json");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    doc["cases"].as_array().expect("cases").clone()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().expect("a string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn compile(v: &Arc<Vocabulary>, text: &str) -> Result<Arc<Compiled>, String> {
    let src = Source::lark(text).map_err(|e| e.to_string())?;
    Compiler::new(v.clone(), CompilerConfig::default())
        .compile(&src)
        .map_err(|e| e.to_string())
}

/// `S` of a grammar `start: %json S` when `S` is a valid JSON Schema.
fn json_schema_of(g: &str) -> Option<Value> {
    let rest = g
        .trim()
        .strip_prefix("start:")?
        .trim_start()
        .strip_prefix("%json")?;
    let s: Value = serde_json::from_str(rest).ok()?;
    (s.is_object() && jsonschema::meta::is_valid(&s)).then_some(s)
}

/// Counts of one class of cases (Lark, or `%json`).
#[derive(Default)]
struct Tally {
    should_compile: usize,
    compiled: usize,
    should_accept: usize,
    accepted: usize,
}

impl Tally {
    fn line(&self, what: &str) -> String {
        let pc = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
        format!(
            "{what}: grammars compiled {}/{} ({:.1} %), valid texts accepted {}/{} ({:.1} %)",
            self.compiled,
            self.should_compile,
            pc(self.compiled, self.should_compile),
            self.accepted,
            self.should_accept,
            pc(self.accepted, self.should_accept)
        )
    }
}

#[test]
fn llguidance_lark_cases() {
    let (v, _) = bytes_and(&[]);
    let (mut lark, mut json) = (Tally::default(), Tally::default());
    let (mut refused_ok, mut refusals) = (0usize, 0usize);
    let (mut wrong, mut short, mut broader, mut token_ids) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for case in cases() {
        let g = case["grammar"].as_str().expect("grammar");
        let test = case["test"].as_str().unwrap_or("?");
        if g.contains("<[") {
            token_ids.push(format!("{test}: {g:?}"));
            continue;
        }
        let got = compile(&v, g);
        if let Some(want) = case.get("error") {
            refusals += 1;
            match got {
                Err(msg) => {
                    assert!(!msg.trim().is_empty(), "{test}: empty message");
                    refused_ok += 1;
                }
                Ok(_) if json_schema_of(g).is_some() => {
                    broader.push(format!("{test}: llguidance: {want}; {g:?}"))
                }
                Ok(_) => wrong.push(format!(
                    "{test}: compiled a grammar llguidance refuses ({want}): {g:?}"
                )),
            }
            continue;
        }
        let t = if g.contains("%json") {
            &mut json
        } else {
            &mut lark
        };
        t.should_compile += 1;
        let accept = strs(&case["accept"]);
        t.should_accept += accept.len();
        let c = match got {
            Ok(c) => c,
            Err(msg) => {
                short.push(format!("{test}: not compiled: {msg}"));
                continue;
            }
        };
        t.compiled += 1;
        for s in &accept {
            if verdict(&c, s.as_bytes()).1 {
                t.accepted += 1;
            } else {
                short.push(format!("{test}: refuses {s:?} ({g:?})"));
            }
        }
        for s in strs(&case["reject"]) {
            if verdict(&c, s.as_bytes()).1 {
                wrong.push(format!("{test}: accepts {s:?} ({g:?})"));
            }
        }
        for s in strs(&case["final_reject"]) {
            if verdict(&c, s.as_bytes()).1 {
                wrong.push(format!("{test}: accepts the unfinished {s:?} ({g:?})"));
            }
        }
    }
    let all = Tally {
        should_compile: lark.should_compile + json.should_compile,
        compiled: lark.compiled + json.compiled,
        should_accept: lark.should_accept + json.should_accept,
        accepted: lark.accepted + json.accepted,
    };
    println!("llguidance's Lark cases:");
    println!("  {}", all.line("all"));
    println!("  {}", lark.line("Lark"));
    println!("  {}", json.line("%json"));
    println!(
        "  refused grammars refused {refused_ok}/{refusals}; JSON Schemas llguidance refuses, \
         compiled here: {}; wrong accepts: {}; grammars naming token ids, not counted: {}",
        broader.len(),
        wrong.len(),
        token_ids.len()
    );
    for s in &broader {
        println!("  compiled here: {s}");
    }
    for s in &short {
        println!("  short: {s}");
    }
    assert!(wrong.is_empty(), "wrong verdicts:\n{}", wrong.join("\n"));
    let share = |a: usize, b: usize| a as f64 / b.max(1) as f64;
    assert!(
        share(all.compiled, all.should_compile) >= MIN_COMPILED,
        "{}",
        all.line("all")
    );
    assert!(
        share(all.accepted, all.should_accept) >= MIN_ACCEPTED,
        "{}",
        all.line("all")
    );
    assert!(
        refusals > 50 && all.should_accept > 150,
        "the case file looks cut"
    );
}

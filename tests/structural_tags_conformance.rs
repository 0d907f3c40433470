//! Conformance with XGrammar on its own structural-tag cases.
//!
//! `tests/data/xgrammar-structural-tags.jsonl` holds the (tag, text) pairs of
//! XGrammar's structural-tag test suites, each with the verdict of XGrammar
//! 0.2.8 (the version on PyPI: `Grammar.from_structural_tag` and
//! `testing._is_grammar_accept_string`), which is the truth here. Every tag
//! is compiled over a byte vocabulary and every text walked byte by byte.
//!
//! The promises: no text XGrammar rejects is accepted (0 wrong accepts, on
//! every tag that compiles); a tag constrain does not compile is refused
//! with a message naming a JSON Pointer; and the share of XGrammar's valid
//! texts accepted does not fall below what it is today.

use constrain::{CompileError, Compiler, CompilerConfig, Source, TokenId};
use constrain_testkit::budget::bytes_and;
use serde_json::Value;
use std::collections::HashMap;

/// Valid texts accepted, in per mille: the floor this suite holds.
const ACCEPTED_PER_MILLE: usize = 900;

#[test]
fn xgrammar_cases_no_wrong_accept() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/xgrammar-structural-tags.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let (vocab, _) = bytes_and(&[]);
    let compiler = Compiler::new(vocab, CompilerConfig::default());
    let mut compiled = HashMap::new();
    let (mut valid, mut accepted, mut rejected_ok, mut invalid) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    let mut refusals: HashMap<String, usize> = HashMap::new();
    let mut missed = Vec::new();
    for line in text.lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        let want = case["accepted"].as_bool().unwrap();
        let s = case["text"].as_str().unwrap();
        let key = case["tag"].to_string();
        let c = compiled.entry(key.clone()).or_insert_with(|| {
            Source::structural_tag(&case["tag"]).and_then(|src| compiler.compile(&src))
        });
        let got = match c {
            Ok(c) => {
                let mut m = c.matcher();
                s.bytes().all(|b| m.accept_token(TokenId(b as u32))) && m.is_accepting()
            }
            Err(e) => {
                match e {
                    CompileError::Tag(t) => assert!(t.pointer().is_some(), "{key}: {t}"),
                    other => panic!("{key}: refused without a tag error: {other}"),
                }
                *refusals.entry(first_words(&e.to_string())).or_default() += 1;
                false
            }
        };
        if want {
            valid += 1;
            if got {
                accepted += 1;
            } else if c.is_ok() {
                missed.push(format!("{key}\n  {s:?}"));
            }
        } else {
            invalid += 1;
            if got {
                wrong.push(format!("{key}\n  {s:?}"));
            } else {
                rejected_ok += 1;
            }
        }
    }
    eprintln!(
        "xgrammar cases: {accepted}/{valid} valid accepted, {rejected_ok}/{invalid} invalid rejected, {} tags, {} refused",
        compiled.len(),
        compiled.values().filter(|c| c.is_err()).count()
    );
    let mut r: Vec<_> = refusals.into_iter().collect();
    r.sort_by(|a, b| b.1.cmp(&a.1));
    for (why, n) in r {
        eprintln!("  refused ({n} texts): {why}");
    }
    for m in missed.iter().take(20) {
        eprintln!("  valid, rejected: {m}");
    }
    assert!(
        wrong.is_empty(),
        "accepted what XGrammar rejects:\n{}",
        wrong.join("\n")
    );
    assert!(
        accepted * 1000 >= valid * ACCEPTED_PER_MILLE,
        "{accepted}/{valid} valid texts accepted"
    );
}

/// The refusal without its pointer: what kind of thing was refused.
fn first_words(e: &str) -> String {
    let e = e.split_once(": ").map_or(e, |(_, rest)| rest);
    e.chars().take(90).collect()
}

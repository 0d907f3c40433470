//! XGrammar 0.2.8, run live, as the oracle of structural tags: every
//! complete output of random and budget-adversarial walks of constrain's
//! matcher must be accepted by XGrammar, and on texts mutated from
//! XGrammar's own cases constrain never accepts what XGrammar rejects.
//!
//! Needs the venv of `scripts/oracle-venv` (XGrammar from PyPI; the test
//! command makes it); skips with a message where it is absent.

use constrain::{Compiler, CompilerConfig, Source};
use constrain_testkit::budget::{adversarial_run, bytes_and};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn oracle() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py = root.join("target/oracles/bin/python");
    py.exists().then_some(py)
}

/// XGrammar's verdicts on `cases` (tag, text); `None` where it refuses the tag.
fn xgrammar(py: &PathBuf, cases: &[(Value, String)]) -> Vec<Option<bool>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(py)
        .arg(root.join("tests/oracles/xgrammar_accepts.py"))
        .env("PYTHONPATH", root.join("tests/oracles/stubs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the oracle starts");
    let mut input = String::new();
    for (tag, text) in cases {
        input.push_str(&json!({"tag": tag, "text": text}).to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("the oracle runs");
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "the oracle failed");
    let v: Vec<Option<bool>> = serde_json::from_slice(&out.stdout).expect("the oracle's verdicts");
    assert_eq!(v.len(), cases.len());
    v
}

fn fixture() -> Vec<(Value, String, bool)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/xgrammar-structural-tags.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let c: Value = serde_json::from_str(l).unwrap();
            (
                c["tag"].clone(),
                c["text"].as_str().unwrap().to_string(),
                c["accepted"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn xgrammar_accepts_every_complete_walk_and_no_mutation_splits_us() {
    let Some(py) = oracle() else {
        eprintln!("skipping: no oracle venv (scripts/oracle-venv makes target/oracles with XGrammar 0.2.8)");
        return;
    };
    let (vocab, eos) = bytes_and(&["<f=", "</f>", "{\"", "\":", "<tool_call>\n", "</think>"]);
    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    let cases = fixture();
    let mut tags: Vec<Value> = Vec::new();
    for (t, _, _) in &cases {
        if !tags.contains(t) {
            tags.push(t.clone());
        }
    }
    let mut rng = StdRng::seed_from_u64(40);
    let mut walks = Vec::new();
    let mut compiled_tags = 0;
    for tag in &tags {
        let Ok(c) = Source::structural_tag(tag).and_then(|s| compiler.compile(&s)) else {
            continue;
        };
        compiled_tags += 1;
        // The least budget that can finish, and more.
        let least = c.matcher().tokens_to_accept().expect("a known budget") as usize + 1;
        for budget in [least, least + 8, least + 40] {
            for _ in 0..3 {
                let out = adversarial_run(&c, eos, budget, 0.3, &mut rng)
                    .unwrap_or_else(|e| panic!("{tag}: budget {budget}: {e}"));
                walks.push((tag.clone(), String::from_utf8(out).expect("UTF-8 output")));
            }
        }
    }
    let verdicts = xgrammar(&py, &walks);
    let refused: Vec<_> = walks
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| **v != Some(true))
        .map(|((t, s), v)| format!("{t}\n  {s:?}: {v:?}"))
        .collect();
    eprintln!(
        "{} walks over {compiled_tags} tags: {} refused by XGrammar",
        walks.len(),
        refused.len()
    );
    assert!(
        refused.is_empty(),
        "outputs XGrammar refuses:\n{}",
        refused.join("\n")
    );

    // Mutations of XGrammar's own texts: one character dropped, doubled, or
    // replaced by a neighbour of the text.
    let mut mutated = Vec::new();
    for (tag, text, _) in &cases {
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            continue;
        }
        for _ in 0..2 {
            let i = rng.random_range(0..chars.len());
            let mut m = chars.clone();
            match rng.random_range(0..3) {
                0 => {
                    m.remove(i);
                }
                1 => m.insert(i, chars[i]),
                _ => m[i] = chars[rng.random_range(0..chars.len())],
            }
            mutated.push((tag.clone(), m.into_iter().collect::<String>()));
        }
    }
    let verdicts = xgrammar(&py, &mutated);
    let mut compiled = std::collections::HashMap::new();
    let mut wrong = Vec::new();
    let mut agree = 0;
    for ((tag, text), v) in mutated.iter().zip(&verdicts) {
        let c = compiled.entry(tag.to_string()).or_insert_with(|| {
            Source::structural_tag(tag)
                .and_then(|s| compiler.compile(&s))
                .ok()
        });
        let Some(c) = c else { continue };
        let mut m = c.matcher();
        let ours = text
            .bytes()
            .all(|b| m.accept_token(constrain::TokenId(b as u32)))
            && m.is_accepting();
        if ours && *v != Some(true) {
            wrong.push(format!("{tag}\n  {text:?}"));
        } else if Some(ours) == *v {
            agree += 1;
        }
    }
    eprintln!("{} mutations: {agree} verdicts agree", mutated.len());
    assert!(
        wrong.is_empty(),
        "accepted what XGrammar rejects:\n{}",
        wrong.join("\n")
    );
}

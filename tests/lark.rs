//! The Lark front end end to end: the example grammars under `grammars/`
//! and one small grammar per construct, compiled over a byte vocabulary,
//! against the accept / reject lists of `tests/lark/cases.json` (each
//! list checked against llguidance by `scripts/test-oracles`); refused
//! constructs refused by name; random outputs of every example accepted
//! and within their budget. `write_oracle_corpus` (ignored; run by
//! `scripts/test-oracles`) writes constrain's verdicts on the cases,
//! mutations of them and sampled outputs, for the oracle to compare.

use constrain::vocab::{TokenId, Vocabulary};
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::{adversarial_run, byte_verdict as verdict, bytes_and};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> Value {
    let text = std::fs::read_to_string(root().join("tests/lark/cases.json")).expect("cases.json");
    serde_json::from_str(&text).expect("cases.json is JSON")
}

/// Single bytes, a few multi-byte tokens that cross lexeme boundaries, EOS.
fn vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "SELECT",
        " FROM",
        "ls",
        " -",
        "<tool_call>",
        "{\"",
        "\":",
        "\",\"",
        "\"}}",
        "1 +",
        ") *",
        ",\n",
        "\r\n",
        " &&",
        "ab",
    ])
}

fn compile(v: &Arc<Vocabulary>, src: &Source) -> Arc<Compiled> {
    Compiler::new(v.clone(), CompilerConfig::default())
        .compile(src)
        .unwrap_or_else(|e| panic!("does not compile: {e}"))
}

/// Every grammar of the cases: (label, source text, accept, reject).
fn grammars() -> Vec<(String, String, Vec<String>, Vec<String>)> {
    let c = cases();
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a string").to_string())
            .collect()
    };
    let mut out = Vec::new();
    for (file, v) in c["examples"].as_object().expect("examples") {
        let text =
            std::fs::read_to_string(root().join("grammars").join(file)).expect("grammar file");
        out.push((file.clone(), text, strs(&v["accept"]), strs(&v["reject"])));
    }
    for v in c["constructs"].as_array().expect("constructs") {
        let g = v["grammar"].as_str().expect("grammar").to_string();
        out.push((format!("{g:?}"), g, strs(&v["accept"]), strs(&v["reject"])));
    }
    out
}

#[test]
fn the_five_examples_are_there_and_load_as_lark() {
    for f in [
        "tool-call.lark",
        "sql-select.lark",
        "arithmetic.lark",
        "csv.lark",
        "shell.lark",
    ] {
        let s = Source::grammar_file(root().join("grammars").join(f))
            .unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(matches!(s, Source::Lark { .. }), "{f}");
    }
}

#[test]
fn examples_and_constructs_accept_and_reject_as_listed() {
    let (v, _) = vocab();
    let mut checked = 0;
    for (label, text, accept, reject) in grammars() {
        let c = compile(
            &v,
            &Source::lark(&text).unwrap_or_else(|e| panic!("{label}: {e}")),
        );
        for s in &accept {
            assert!(verdict(&c, s.as_bytes()).1, "{label} should accept {s:?}");
            checked += 1;
        }
        for s in &reject {
            assert!(!verdict(&c, s.as_bytes()).1, "{label} should reject {s:?}");
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked}");
}

#[test]
fn refused_constructs_are_errors_that_say_what_and_where() {
    for v in cases()["refused"].as_array().expect("refused") {
        let g = v["grammar"].as_str().expect("grammar");
        let want = v["error"].as_str().expect("error");
        match Source::lark(g) {
            Ok(_) => panic!("{g:?} compiled"),
            Err(e @ CompileError::Lark(_)) => {
                let msg = e.to_string();
                assert!(msg.contains(want), "{g:?}: {msg}");
                assert!(msg.starts_with("line "), "{g:?}: {msg}");
            }
            Err(e) => panic!("{g:?}: not a Lark error: {e}"),
        }
    }
}

#[test]
fn outputs_of_every_example_are_accepted_within_budget() {
    let (v, eos) = vocab();
    let mut rng = StdRng::seed_from_u64(7);
    for (label, text, _, _) in grammars() {
        let c = compile(&v, &Source::lark(&text).expect("parses"));
        let start = c.matcher().tokens_to_accept().expect("a budget") as usize;
        for _ in 0..20 {
            let budget = start + rng.random_range(0..60);
            let out = adversarial_run(&c, eos, budget, 0.3, &mut rng)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert!(
                verdict(&c, &out).1,
                "{label}: {:?}",
                String::from_utf8_lossy(&out)
            );
        }
    }
}

#[test]
fn lark_and_gbnf_of_the_same_language_agree() {
    let (v, _) = vocab();
    let lark = compile(
        &v,
        &Source::grammar_file(root().join("grammars/arithmetic.lark")).expect("lark"),
    );
    let gbnf = compile(
        &v,
        &Source::gbnf("root ::= e\ne ::= e ws [-+] ws t | t\nt ::= t ws [*/] ws f | f\nf ::= n | \"-\" ws f | \"(\" ws e ws \")\"\nn ::= [0-9]+ (\".\" [0-9]+)?\nws ::= \" \"*\n").expect("gbnf"),
    );
    let mut rng = StdRng::seed_from_u64(3);
    let alphabet = b"0123456789.+-*/() ";
    for _ in 0..3000 {
        let n = rng.random_range(0..12);
        let s: Vec<u8> = (0..n)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect();
        assert_eq!(
            verdict(&lark, &s).1,
            verdict(&gbnf, &s).1,
            "{:?}",
            String::from_utf8_lossy(&s)
        );
    }
}

/// Texts near `s`: deletions, insertions and substitutions of one
/// character (from `alphabet`), and prefixes.
fn mutations(s: &str, alphabet: &[char], rng: &mut StdRng, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    for _ in 0..n {
        let mut c = chars.clone();
        let pick = |rng: &mut StdRng| alphabet[rng.random_range(0..alphabet.len())];
        match rng.random_range(0..4) {
            0 if !c.is_empty() => {
                c.remove(rng.random_range(0..c.len()));
            }
            1 => {
                let ch = pick(rng);
                c.insert(rng.random_range(0..=c.len()), ch);
            }
            2 if !c.is_empty() => {
                let i = rng.random_range(0..c.len());
                c[i] = pick(rng);
            }
            _ => c.truncate(rng.random_range(0..=c.len())),
        }
        out.push(c.into_iter().collect());
    }
    out
}

/// Writes `$LARK_ORACLE_OUT` (run by `scripts/test-oracles`): for every
/// grammar, texts (the cases, mutations, sampled outputs) with constrain's
/// verdicts.
#[test]
#[ignore]
fn write_oracle_corpus() {
    let Some(out) = std::env::var_os("LARK_ORACLE_OUT") else {
        panic!("set LARK_ORACLE_OUT to the corpus file to write");
    };
    let (v, eos) = vocab();
    let mut rng = StdRng::seed_from_u64(11);
    let mut entries = Vec::new();
    for (label, text, accept, reject) in grammars() {
        let c = compile(&v, &Source::lark(&text).expect("parses"));
        let mut texts: Vec<String> = accept.iter().chain(&reject).cloned().collect();
        let mut alphabet: Vec<char> = texts.iter().flat_map(|s| s.chars()).collect();
        alphabet.sort_unstable();
        alphabet.dedup();
        if alphabet.is_empty() {
            alphabet.push('a');
        }
        for s in accept.iter().chain(&reject) {
            texts.extend(mutations(s, &alphabet, &mut rng, 40));
        }
        let start = c.matcher().tokens_to_accept().expect("a budget") as usize;
        for _ in 0..60 {
            let budget = start + rng.random_range(0..50);
            if let Ok(o) = adversarial_run(&c, eos, budget, 0.3, &mut rng) {
                if let Ok(s) = String::from_utf8(o) {
                    texts.extend(mutations(&s, &alphabet, &mut rng, 2));
                    texts.push(s);
                }
            }
        }
        texts.sort();
        texts.dedup();
        let verdicts: Vec<Value> = texts
            .iter()
            .map(|t| {
                let (prefix, accepted) = verdict(&c, t.as_bytes());
                json!({"text": t, "prefix": prefix, "accept": accepted})
            })
            .collect();
        entries.push(json!({"label": label, "grammar": text, "texts": verdicts}));
    }
    std::fs::write(&out, serde_json::to_string(&entries).expect("JSON")).expect("write the corpus");
}

/// Compile times of `grammars/*.lark` over the Qwen tokenizer
/// (`$CONSTRAIN_HOME/tokenizer.json`; skipped with a message without it).
#[test]
#[ignore]
fn compile_times_over_qwen() {
    let home = std::env::var_os("CONSTRAIN_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/constrain")
        });
    let Ok(v) = Vocabulary::from_tokenizer_json_file(home.join("tokenizer.json")) else {
        eprintln!("skipping: no tokenizer at {}", home.display());
        return;
    };
    let v = Arc::new(v);
    for f in [
        "tool-call.lark",
        "sql-select.lark",
        "arithmetic.lark",
        "csv.lark",
        "shell.lark",
    ] {
        let t = std::time::Instant::now();
        let src = Source::grammar_file(root().join("grammars").join(f)).expect("parses");
        let parsed = t.elapsed();
        let c = compile(&v, &src);
        let s = c.stats();
        println!(
            "{f}: parse+check {:.1} ms, compile {:.1} ms (first mask), {} fragments, {} DFA states",
            parsed.as_secs_f64() * 1e3,
            s.total().as_secs_f64() * 1e3,
            s.fragments,
            s.dfa_states
        );
    }
}

//! `constrain::grammar::convert`: every example GBNF grammar written as
//! Lark, and every example Lark grammar written as GBNF, keeps its
//! language. Checked over a vocabulary of single bytes: random outputs of
//! each side (adversarial draws within a budget) are accepted by the
//! other, mutations of them get the same verdict from both, and the
//! listed accept / reject texts of the Lark examples hold for the GBNF.

use constrain::grammar::convert::{gbnf_to_lark, lark_to_gbnf};
use constrain::grammar::gbnf::Gbnf;
use constrain::grammar::lark::Lark;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use constrain_testkit::budget::{adversarial_run, bytes_and};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn compile(v: &Arc<Vocabulary>, src: &Source) -> Arc<Compiled> {
    Compiler::new(v.clone(), CompilerConfig::default())
        .compile(src)
        .unwrap_or_else(|e| panic!("does not compile: {e}"))
}

fn outputs(c: &Compiled, eos: TokenId, rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    let start = c.matcher().tokens_to_accept().expect("a budget") as usize;
    (0..n)
        .map(|_| {
            let budget = start + rng.random_range(0..80);
            adversarial_run(c, eos, budget, 0.3, rng).expect("an output")
        })
        .collect()
}

/// Outputs of each side accepted by the other; one-byte mutations judged
/// alike by both.
fn same_language(label: &str, a: &Compiled, b: &Compiled, eos: TokenId) {
    let mut rng = StdRng::seed_from_u64(11);
    for (x, y, dir) in [(a, b, "a→b"), (b, a, "b→a")] {
        for out in outputs(x, eos, &mut rng, 40) {
            let shown = String::from_utf8_lossy(&out).into_owned();
            assert!(accepts(y, &out), "{label} {dir}: {shown:?}");
            for _ in 0..3 {
                let mut m = out.clone();
                let i = rng.random_range(0..=m.len());
                let byte = b" ,()+-*/0123456789abcxyz\"\n"[rng.random_range(0..26)];
                if i < m.len() && rng.random_bool(0.5) {
                    m.remove(i);
                } else {
                    m.insert(i, byte);
                }
                assert_eq!(
                    accepts(x, &m),
                    accepts(y, &m),
                    "{label}: {:?}",
                    String::from_utf8_lossy(&m)
                );
            }
        }
    }
}

fn files(ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(root().join("grammars"))
        .expect("grammars/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_gbnf_grammar_keeps_its_language_as_lark() {
    let (v, eos) = bytes_and(&[]);
    let gbnfs = files("gbnf");
    assert!(gbnfs.len() >= 5);
    for p in gbnfs {
        let text = std::fs::read_to_string(&p).expect("read");
        let g = Gbnf::parse("g", &text).expect("parses");
        let lark = gbnf_to_lark(&g).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let a = compile(&v, &Source::gbnf(&text).expect("gbnf"));
        let b = compile(&v, &Source::lark(&lark).expect("lark"));
        same_language(&p.display().to_string(), &a, &b, eos);
    }
}

#[test]
fn every_example_lark_grammar_keeps_its_language_as_gbnf() {
    let (v, eos) = bytes_and(&[]);
    let cases: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/lark/cases.json")).expect("cases"),
    )
    .expect("JSON");
    let larks = files("lark");
    assert!(larks.len() >= 5);
    for p in larks {
        let text = std::fs::read_to_string(&p).expect("read");
        let l = Lark::parse("l", &text).expect("parses");
        let gbnf = lark_to_gbnf(&l).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let a = compile(&v, &Source::lark(&text).expect("lark"));
        let b = compile(&v, &Source::gbnf(&gbnf).expect("gbnf"));
        let label = p.display().to_string();
        same_language(&label, &a, &b, eos);
        let file = p.file_name().unwrap().to_string_lossy().into_owned();
        let listed = &cases["examples"][&file];
        for (key, want) in [("accept", true), ("reject", false)] {
            for s in listed[key].as_array().expect("a list") {
                let s = s.as_str().expect("text");
                assert_eq!(accepts(&b, s.as_bytes()), want, "{label}: {s:?}");
            }
        }
    }
}

#[test]
fn special_tokens_have_no_gbnf_spelling() {
    let l = Lark::parse("l", "start: \"a\" <|im_start|>\n").expect("parses");
    let e = lark_to_gbnf(&l).expect_err("a token is no text");
    assert!(e.to_string().contains("special token"), "{e}");
}

//! `guide_walk`: arbitrary guide operations (advance with any id, advance
//! with an allowed token, rollback, reset) against a fixed set of real
//! constraints (the `grammars/` library, a JSON record regex and the example
//! schemas of `schemas/` compiled by the schema compiler) over the real Qwen
//! vocabulary (`$CONSTRAIN_HOME/tokenizer.json`, required).
//!
//! Invariants (in `constrain_testkit::check::check_guide_walk_case`, replayed by
//! `tests/fuzz_regressions.rs`): `advance` succeeds exactly for the allowed
//! tokens, which are exactly those the DFA oracle says keep the text
//! completable; a refused advance changes nothing; `rollback` restores the
//! exact state, tokens and mask; `reset` returns to the start.
//!
//! Bounds: at most 64 operations, rollbacks of at most 9 tokens. Indexes are
//! built once per process. On a violation the panic message carries the case
//! as JSON: save it under `fuzz/regressions/guide_walk/NAME.json`.
#![no_main]

use arbitrary::Arbitrary;
use constrain_testkit::check::{check_guide_walk_case, GuideOp, GuideWalkCase, Oracle};
use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::grammar::Grammar;
use constrain::index::{IndexConfig, TokenIndex};
use constrain::schema::{compile, SchemaOptions};
use constrain::vocab::{Vocabulary, QWEN_LOGITS_WIDTH};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

const RECORD: &str = r#"\{"name": "[a-zA-Z_][a-zA-Z0-9_]{0,63}", "email": "[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}", "tags": \[("[^"\\\x00-\x1f]{1,20}"(, "[^"\\\x00-\x1f]{1,20}"){0,4})?\], "age": (0|[1-9][0-9]{0,2}), "bio": "[^"\\\x00-\x1f]{0,200}"\}"#;

struct Fixture {
    pattern: String,
    index: Arc<TokenIndex>,
    oracle: Oracle<'static, ByteDfa>,
}

fn fixtures() -> &'static [Fixture] {
    static F: OnceLock<Vec<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let home = std::env::var_os("CONSTRAIN_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
            });
        let vocab = Vocabulary::from_tokenizer_json_file(home.join("tokenizer.json"))
            .expect("guide_walk needs the Qwen tokenizer in $CONSTRAIN_HOME");
        let vocab = Arc::new(vocab.with_logits_width(QWEN_LOGITS_WIDTH).expect("width"));
        let mut patterns: Vec<String> = vec![
            RECORD.into(),
            r"(北京|上海|東京|😀🎉|café)+".into(),
            r"[\p{L}\p{N} ]{2,12}".into(),
            "(a|ab|abc|abcd){2,5}x?".into(),
        ];
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../grammars");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("grammars/")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "regex"))
            .collect();
        files.sort();
        for f in files {
            patterns.push(Grammar::load(&f).expect("grammar").pattern);
        }
        // The example schemas of `schemas/`, compiled (those that compile).
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("schemas/")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).expect("schema file");
            let schema: serde_json::Value = serde_json::from_str(&text).expect("schema JSON");
            if let Ok(c) = compile(&schema, &SchemaOptions::default()) {
                patterns.push(c.regex);
            }
        }
        patterns
            .into_iter()
            .map(|pattern| {
                let dfa: &'static ByteDfa = Box::leak(Box::new(
                    ByteDfa::new(&pattern, &DfaConfig::default()).expect("pattern"),
                ));
                let index =
                    TokenIndex::build(dfa, vocab.clone(), &IndexConfig::default()).expect("index");
                let oracle = Oracle::new(dfa, 1_000_000).expect("oracle");
                Fixture {
                    pattern,
                    index: Arc::new(index),
                    oracle,
                }
            })
            .collect()
    })
}

#[derive(Arbitrary, Debug)]
enum Op {
    Advance(u32),
    /// An id near the last allowed one (neighbours in the vocabulary are
    /// often similar bytes, so these sit on the mask's edge).
    AdvanceNear(u32, i8),
    AdvanceAllowed(u32),
    Rollback(u8),
    Reset,
}

#[derive(Arbitrary, Debug)]
struct Input {
    which: u8,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    let fx = fixtures();
    let f = &fx[input.which as usize % fx.len()];
    let ops: Vec<GuideOp> = input
        .ops
        .iter()
        .take(64)
        .map(|op| match *op {
            Op::Advance(id) => GuideOp::Advance(id),
            Op::AdvanceNear(id, d) => {
                let base = f.index.allowed(f.index.start());
                let n = base.len().max(1) as u32;
                let t = base.iter().nth((id % n) as usize).map_or(0, |t| t.0);
                GuideOp::Advance(t.wrapping_add_signed(d as i32))
            }
            Op::AdvanceAllowed(k) => GuideOp::AdvanceAllowed(k),
            Op::Rollback(n) => GuideOp::Rollback(n as u32 % 10),
            Op::Reset => GuideOp::Reset,
        })
        .collect();
    let case = GuideWalkCase {
        pattern: f.pattern.clone(),
        ops,
    };
    if let Err(v) = check_guide_walk_case(&f.index, &f.oracle, &case) {
        panic!(
            "{v}\ncase: {}",
            serde_json::to_string(&case).unwrap_or_default()
        );
    }
});

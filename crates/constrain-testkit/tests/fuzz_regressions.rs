//! Replays the fuzz cases committed under `fuzz/regressions/<target>/*.json`
//! through the same checking functions the fuzz targets call
//! (`constrain_testkit::check`), plus a seeded random sweep of the `regex_index`
//! invariants so `cargo test` exercises them without cargo-fuzz.

use constrain_testkit::assets as common;

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::index::{IndexConfig, TokenIndex};
use constrain_testkit::check::{
    check_guide_walk_case, check_regex_index_case, CaseOutcome, GuideWalkCase, Oracle,
    RegexIndexCase, Violation,
};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;

fn regressions(target: &str) -> Vec<(PathBuf, String)> {
    let dir = constrain_testkit::assets::repo_root()
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The `regex` crate as the independent full-match oracle.
fn regex_oracle(pattern: &str) -> impl Fn(&[u8]) -> bool {
    let re = regex::bytes::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(64 << 20)
        .build();
    move |text: &[u8]| re.as_ref().is_ok_and(|re| re.is_match(text))
}

/// Every invariant strict, token-level dead ends included (token-level
/// liveness refuses or prunes them; see `token_level_dead_end_is_refused`).
fn run_regex_case(case: &RegexIndexCase) -> Result<CaseOutcome, Violation> {
    check_regex_index_case(case, &regex_oracle(&case.pattern), false)
}

#[test]
fn regex_index_regressions_replay() {
    let cases = regressions("regex_index");
    assert!(
        !cases.is_empty(),
        "fuzz/regressions/regex_index/ holds cases"
    );
    for (path, text) in cases {
        let case: RegexIndexCase =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(v) = run_regex_case(&case) {
            panic!("{}: {v}", path.display());
        }
    }
}

#[test]
fn guide_walk_regressions_replay() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let cases = regressions("guide_walk");
    assert!(
        !cases.is_empty(),
        "fuzz/regressions/guide_walk/ holds cases"
    );
    for (path, text) in cases {
        let case: GuideWalkCase =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let dfa = ByteDfa::new(&case.pattern, &DfaConfig::default()).unwrap();
        let index =
            Arc::new(TokenIndex::build(&dfa, vocab.clone(), &IndexConfig::default()).unwrap());
        let oracle = Oracle::new(&dfa, 1_000_000).unwrap();
        if let Err(v) = check_guide_walk_case(&index, &oracle, &case) {
            panic!("{}: {v}", path.display());
        }
    }
}

/// The checker itself must be able to fail: a case whose independent matcher
/// disagrees with the DFA is reported, not passed.
#[test]
fn a_lying_oracle_is_caught() {
    let case = RegexIndexCase {
        pattern: "ab|cd".into(),
        tokens: vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()],
        all_single_bytes: false,
        eos_count: 1,
        extra_width: 0,
        choices: vec![0, 0],
    };
    assert!(matches!(
        run_regex_case(&case),
        Ok(CaseOutcome::Checked { .. })
    ));
    let liar = |t: &[u8]| t != b"ab";
    let v = check_regex_index_case(&case, &liar, false).unwrap_err();
    assert!(v.what.contains("independent matcher"), "{v}");
}

/// Found by the regex_index target: over a vocabulary that cannot spell `b`,
/// the index for `a*b` used to build and allow `a` forever although no token
/// sequence ever reaches acceptance. Token-level liveness now refuses it with
/// `IndexError::IncompatibleVocabulary`.
#[test]
fn token_level_dead_end_is_refused() {
    let case = RegexIndexCase {
        pattern: "a*b".into(),
        tokens: vec![b"a".to_vec()],
        all_single_bytes: false,
        eos_count: 1,
        extra_width: 0,
        choices: vec![],
    };
    match check_regex_index_case(&case, &regex_oracle(&case.pattern), false) {
        Ok(CaseOutcome::Refused(_)) => {}
        other => panic!("a*b over {{a}} must be refused, got {other:?}"),
    }
}

const PATTERNS: &[&str] = &[
    "a*b",
    "(ab)+c?",
    r#""[^"\\]{0,5}""#,
    "(cat|dog|bird)(, (cat|dog|bird)){0,3}",
    "[0-9]{1,3}(\\.[0-9]{1,2})?",
    "(é|中|😀)+x?",
    "(?i)ab{2,4}",
    "(?s:.){1,3}",
    "\\{(\"a\": [0-9]+(, )?)*\\}",
    "(a|ab|abc)*d",
    "x(?:)y?",
    "[^a-z]{2}",
];

/// Seeded random cases in the shape the fuzz target makes: a pattern, a small
/// vocabulary of fragments (multi-byte characters split across tokens) and
/// walk choices.
fn random_case(rng: &mut StdRng) -> RegexIndexCase {
    let pattern = PATTERNS[rng.random_range(0..PATTERNS.len())].to_string();
    let pool: Vec<u8> = "ab cd,\"{}:0129xyZé中😀\\.\n".bytes().collect();
    let n = rng.random_range(0..30);
    let mut tokens: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let len = rng.random_range(1..5);
            (0..len)
                .map(|_| pool[rng.random_range(0..pool.len())])
                .collect()
        })
        .collect();
    for &b in &pool {
        if rng.random_range(0..4) != 0 {
            tokens.push(vec![b]);
        }
    }
    RegexIndexCase {
        pattern,
        tokens,
        all_single_bytes: rng.random_range(0..3) == 0,
        eos_count: rng.random_range(1..3),
        extra_width: rng.random_range(0..3),
        choices: (0..rng.random_range(0..40)).map(|_| rng.random()).collect(),
    }
}

#[test]
fn regex_index_random_sweep() {
    let mut rng = StdRng::seed_from_u64(2024);
    let (mut checked, mut refused) = (0, 0);
    for i in 0..300 {
        let case = random_case(&mut rng);
        match run_regex_case(&case) {
            Ok(CaseOutcome::Checked { .. }) => checked += 1,
            Ok(CaseOutcome::Refused(_)) => refused += 1,
            Err(v) => panic!(
                "case {i}: {v}\ncase: {}",
                serde_json::to_string(&case).unwrap()
            ),
        }
    }
    eprintln!("regex_index sweep: {checked} checked, {refused} refused");
    assert!(checked > 100, "most sweep cases run the checks ({checked})");
}

/// `check_walk` over the real Qwen vocabulary (sampled masks) for every
/// grammar of the library: the walk's output matches the `regex` crate.
#[test]
fn qwen_grammar_walks_pass_the_checks() {
    use constrain_testkit::check::{check_walk, WalkEnd, WalkOptions};
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let dir = constrain_testkit::assets::repo_root().join("grammars");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "regex"))
        .collect();
    files.sort();
    let mut rng = StdRng::seed_from_u64(5);
    let opts = WalkOptions::default()
        .full_masks(false)
        .sample_stride(97)
        .max_steps(24);
    for f in files {
        let pattern = constrain::grammar::Grammar::load(&f).unwrap().pattern;
        let dfa = ByteDfa::new(&pattern, &DfaConfig::default()).unwrap();
        let index =
            Arc::new(TokenIndex::build(&dfa, vocab.clone(), &IndexConfig::default()).unwrap());
        let oracle = Oracle::new(&dfa, 1_000_000).unwrap();
        let full = regex_oracle(&pattern);
        for _ in 0..3 {
            let choices: Vec<u8> = (0..48).map(|_| rng.random()).collect();
            match check_walk(&index, &oracle, &choices, &opts, &full) {
                Ok(WalkEnd::Finished(_)) => {}
                other => panic!("{}: {other:?}", f.display()),
            }
        }
    }
}

#[test]
fn sampling_regressions_replay() {
    use constrain_testkit::check::{check_sampling_case, SamplingCase};
    let cases = regressions("sampling");
    assert!(!cases.is_empty(), "fuzz/regressions/sampling/ holds cases");
    for (path, text) in cases {
        let case: SamplingCase =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(v) = check_sampling_case(&case) {
            panic!("{}: {v}", path.display());
        }
    }
}

/// Seeded random sampling cases in the fuzz target's shape.
#[test]
fn sampling_random_sweep() {
    use constrain_testkit::check::{check_sampling_case, SamplingCase, SamplingOutcome};
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        0.0,
        -0.0,
        1e30,
    ];
    let mut rng = StdRng::seed_from_u64(99);
    let mut picked = 0;
    for i in 0..2000 {
        let n = rng.random_range(1..600);
        let f = |rng: &mut StdRng| -> f32 {
            if rng.random_range(0..6) == 0 {
                specials[rng.random_range(0..specials.len())]
            } else {
                rng.random_range(-20.0..20.0)
            }
        };
        let logits: Vec<u32> = (0..n).map(|_| f(&mut rng).to_bits()).collect();
        let mask = match rng.random_range(0..3) {
            0 => None,
            1 => Some(
                (0..n as u32)
                    .filter(|_| rng.random_range(0..2) == 0)
                    .collect(),
            ),
            _ => Some(
                (0..rng.random_range(0..8))
                    .map(|_| rng.random_range(0..n as u32))
                    .collect(),
            ),
        };
        let knob = |rng: &mut StdRng, lo: f32, hi: f32| -> u32 {
            if rng.random_range(0..8) == 0 {
                f(rng).to_bits()
            } else {
                rng.random_range(lo..hi).to_bits()
            }
        };
        let case = SamplingCase {
            logits,
            mask,
            history: (0..rng.random_range(0..10))
                .map(|_| rng.random_range(0..n as u32))
                .collect(),
            knobs: [
                if rng.random_range(0..4) == 0 {
                    0f32.to_bits()
                } else {
                    knob(&mut rng, 0.05, 2.0)
                },
                knob(&mut rng, 0.05, 1.0),
                knob(&mut rng, 0.0, 0.5),
                knob(&mut rng, 0.5, 2.0),
                knob(&mut rng, -1.0, 1.0),
                knob(&mut rng, -1.0, 1.0),
            ],
            top_k: rng.random_range(0..50),
            penalty_last_n: (rng.random_range(0..3) > 0).then(|| rng.random_range(0..5u32)),
            logit_bias: (0..rng.random_range(0..4))
                .map(|_| (rng.random_range(0..n as u32), f(&mut rng).to_bits()))
                .collect(),
            seed: rng.random(),
        };
        match check_sampling_case(&case) {
            Ok(SamplingOutcome::Picked { .. }) => picked += 1,
            Ok(_) => {}
            Err(v) => panic!(
                "case {i}: {v}\ncase: {}",
                serde_json::to_string(&case).unwrap()
            ),
        }
    }
    assert!(picked > 500, "most sweep cases pick a token ({picked})");
}

fn validator(schema: &serde_json::Value) -> Option<jsonschema::Validator> {
    jsonschema::validator_for(schema).ok()
}

#[derive(serde::Deserialize)]
struct SchemaRegression {
    schema: serde_json::Value,
    #[serde(default)]
    compliant: bool,
    #[serde(default)]
    choices: Vec<u8>,
}

#[test]
fn schema_compile_regressions_replay() {
    use constrain::schema::SchemaOptions;
    use constrain_testkit::check::{check_schema_both_ways, json_test_vocabulary};
    let vocab = Arc::new(json_test_vocabulary());
    let cases = regressions("schema_compile");
    assert!(
        !cases.is_empty(),
        "fuzz/regressions/schema_compile/ holds cases"
    );
    for (path, text) in cases {
        let case: SchemaRegression =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let opts = if case.compliant {
            SchemaOptions::compliant()
        } else {
            SchemaOptions::default()
        };
        let val = validator(&case.schema);
        let validate = |v: &serde_json::Value| val.as_ref().is_none_or(|x| x.is_valid(v));
        let (_, outcome) = check_schema_both_ways(
            &case.schema,
            &opts,
            vocab.clone(),
            &constrain_testkit::check::fuzz_dfa_config(),
            &case.choices,
            &validate,
        )
        .unwrap_or_else(|v| panic!("{}: {v}", path.display()));
        // The seeds written for the compiler's own features must compile and
        // finish their walks there.
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("seed-unique") || name.starts_with("seed-unevaluated") {
            assert_eq!(
                outcome,
                constrain_testkit::check::SchemaOutcome::Checked { finished: 2 },
                "{}",
                path.display()
            );
        }
    }
}

/// `check_schema_case` over a deterministic sample of real schemas from
/// MaskBench (every 40th file): outputs of random walks validate.
#[test]
fn maskbench_sample_walks_validate() {
    use constrain::schema::SchemaOptions;
    use constrain_testkit::check::{check_schema_case, json_test_vocabulary, SchemaOutcome};
    let Some(corpora) = common::corpora() else {
        return;
    };
    let dir = corpora.join("maskbench-dev");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let vocab = Arc::new(json_test_vocabulary());
    let (mut checked, mut refused, mut finished) = (0, 0, 0);
    for (i, f) in files.iter().enumerate().filter(|(i, _)| i % 40 == 0) {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let schema = &doc["schema"];
        let Some(val) = validator(schema) else {
            continue;
        };
        let validate = |v: &serde_json::Value| val.is_valid(v);
        let choices: Vec<u8> = (0..64).map(|k| (k * 37 + i) as u8).collect();
        match check_schema_case(
            schema,
            &SchemaOptions::default(),
            vocab.clone(),
            &constrain_testkit::check::fuzz_dfa_config(),
            &choices,
            2,
            &validate,
        ) {
            Ok(SchemaOutcome::Checked { finished: n }) => {
                checked += 1;
                finished += n;
            }
            Ok(SchemaOutcome::Refused(_)) => refused += 1,
            Err(v) => panic!("{}: {v}", f.display()),
        }
    }
    eprintln!("maskbench sample: {checked} schemas checked ({finished} outputs validated), {refused} refused");
    assert!(checked > 40, "most sampled schemas compile ({checked})");
}

/// Found by `constrain soak`: `{"type": "integer"}` used to compile to an
/// integer of unbounded length (now at most 18 digits). Past 64 bits,
/// serde_json parses it as a float, which draft-04 validators (`jsonschema`)
/// reject as "not an integer" (found by `constrain soak` on
/// `JsonSchemaStore---sprite.json`: `"dpi": 279221549035785928259029102602351`);
/// past ~309 digits serde_json refuses the text outright ("number out of
/// range"), so the output does not parse at all.
#[test]
fn integers_stay_parseable_and_valid() {
    use constrain::schema::{compile, SchemaOptions};
    let draft4 = serde_json::json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"});
    let re = compile(&draft4, &SchemaOptions::default()).unwrap().regex;
    let dfa = ByteDfa::new(&re, &DfaConfig::default()).unwrap();
    let val = validator(&draft4).unwrap();
    let big = "279221549035785928259029102602351";
    assert!(
        !dfa.matches(big.as_bytes()) || val.is_valid(&serde_json::from_str(big).unwrap()),
        "the schema allows {big}, which does not validate"
    );
    let huge = format!("1{}", "0".repeat(400));
    assert!(
        !dfa.matches(huge.as_bytes()) || serde_json::from_str::<serde_json::Value>(&huge).is_ok(),
        "the schema allows a 401-digit integer, which serde_json cannot parse"
    );
}

#[test]
fn gbnf_compile_regressions_replay() {
    use constrain_testkit::check::{check_gbnf_case, GbnfCase};
    let cases = regressions("gbnf_compile");
    assert!(
        !cases.is_empty(),
        "fuzz/regressions/gbnf_compile/ holds cases"
    );
    for (path, text) in cases {
        let case: GbnfCase =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(v) = check_gbnf_case(&case) {
            panic!("{}: {v}", path.display());
        }
    }
}

//! The ratchet: coverage only goes up. Runs the schemas of a fixed,
//! stratified subset of `../shared/corpora/maskbench-dev`
//! (`tests/baselines/maskbench-ci-subset.txt`) that passed when the baseline
//! was recorded (`tests/baselines/maskbench-dev.passing`), with a generous time
//! limit so that a slower CI machine does not turn a pass into a timeout, and
//! the whole JSON-Schema-Test-Suite (draft 2020-12) through MaskBench's rules.
//! It fails when
//! * any invalid instance is accepted (a soundness bug), or
//! * a schema (MaskBench) or a test (suite) listed as passing in
//!   `tests/baselines/` no longer passes.
//!
//! Regenerate the baselines with `scripts/maskbench-baseline` after an
//! improvement (and commit them). Skips with a message when `../shared` is absent.

use constrain_testkit::assets as common;

use constrain_testkit::maskbench::{self, CaseResult, RunConfig};
use std::collections::BTreeSet;
use std::path::Path;

fn baseline(name: &str) -> BTreeSet<String> {
    let p = constrain_testkit::assets::repo_root()
        .join("tests/baselines")
        .join(name);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

fn run(files: &[std::path::PathBuf]) -> Vec<CaseResult> {
    let vocab = common::qwen_vocab().unwrap();
    let tok = common::qwen_tokenizer().unwrap();
    let cfg = RunConfig::default().timeout(std::time::Duration::from_secs(120));
    let mut out = Vec::new();
    for f in files {
        for case in maskbench::load_file(f).unwrap() {
            out.push(maskbench::run_case(&case, &vocab, tok, &cfg));
        }
    }
    out
}

#[test]
fn maskbench_subset_never_regresses() {
    let (Some(corpora), Some(_)) = (common::corpora(), common::qwen_vocab()) else {
        return;
    };
    let dir = corpora.join("maskbench-dev");
    let subset = baseline("maskbench-ci-subset.txt");
    let passing = baseline("maskbench-dev.passing");
    let files: Vec<_> = subset
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.exists())
        .collect();
    assert!(
        files.len() * 10 >= subset.len() * 9,
        "the CI subset files exist in the corpus"
    );
    let results = run(&files);
    let mut regressions = Vec::new();
    let mut invalid = Vec::new();
    for r in &results {
        let name = Path::new(&r.name)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if r.invalid_accepted > 0 {
            invalid.push(name.clone());
        }
        if passing.contains(&name) && r.outcome != maskbench::Outcome::Pass {
            regressions.push(format!(
                "{name}: {:?} {}",
                r.outcome,
                r.error.clone().unwrap_or_default()
            ));
        }
    }
    let pass = results
        .iter()
        .filter(|r| r.outcome == maskbench::Outcome::Pass)
        .count();
    eprintln!("maskbench CI subset: {pass}/{} passing", results.len());
    assert!(
        invalid.is_empty(),
        "invalid instances accepted (soundness bug) in: {invalid:?}"
    );
    assert!(
        regressions.is_empty(),
        "schemas that passed no longer pass:\n{}",
        regressions.join("\n")
    );
}

#[test]
fn test_suite_never_regresses() {
    let (Some(corpora), Some(_)) = (common::corpora(), common::qwen_vocab()) else {
        return;
    };
    let root = corpora.join("json-schema-test-suite/tests/draft2020-12");
    let passing = baseline("test-suite.passing");
    let files: Vec<_> = maskbench::collect_files(&root)
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("refRemote"))
        .collect();
    let results = run(&files);
    let mut regressions = Vec::new();
    let mut invalid = Vec::new();
    for r in &results {
        let rel = r
            .name
            .strip_prefix(&format!("{}/", root.display()))
            .unwrap_or(&r.name)
            .to_string();
        for (i, inst) in r.instances.iter().enumerate() {
            let id = format!("{rel}#{i}");
            if !inst.valid && inst.accepted {
                invalid.push(id.clone());
            }
            let ok = r.outcome != maskbench::Outcome::CompileError && inst.valid == inst.accepted;
            if passing.contains(&id) && !ok {
                regressions.push(id);
            }
        }
    }
    assert!(
        invalid.is_empty(),
        "invalid instances accepted (soundness bug): {invalid:?}"
    );
    assert!(
        regressions.is_empty(),
        "suite tests that passed no longer pass: {regressions:?}"
    );
}

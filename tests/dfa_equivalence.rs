//! The sparse determinizer (`ByteDfa::new`) against regex-automata's own
//! (`ByteDfa::new_reference`): the two DFAs must accept exactly the same
//! language, checked by a walk over pairs of states, on the regexes of real
//! schemas (strict and compliant) and of the bundled grammars.
//!
//! By default: the CI subset of `../shared/corpora/maskbench-dev` (skipped with
//! a message when `../shared` is absent) plus `schemas/` and `grammars/`. With
//! `CONSTRAIN_DFA_EQUIV_ALL=1`, every MaskBench dev schema (every K-th with
//! `CONSTRAIN_DFA_EQUIV_EVERY=K` as well).

use constrain_testkit::assets as common;

use constrain::dfa::{first_difference, ByteDfa, DfaConfig};
use constrain::schema::{self, SchemaOptions};
use std::path::{Path, PathBuf};

/// Reference builds of the largest schemas take seconds each; bound them.
fn config() -> DfaConfig {
    DfaConfig::default()
        .dfa_size_limit(16 << 20)
        .determinize_size_limit(64 << 20)
}

/// Compares the two builds of `pattern`; returns whether it was compared
/// (both builds within the limits).
fn compare(label: &str, pattern: &str) -> bool {
    let cfg = config();
    let (ours, reference) = match (
        ByteDfa::new(pattern, &cfg),
        ByteDfa::new_reference(pattern, &cfg),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(b)) => {
            assert_eq!(
                std::mem::discriminant(&a),
                std::mem::discriminant(&b),
                "{label}: different errors: {a} / {b}"
            );
            return false;
        }
        // One side hit a size limit the other (with fewer or more states) did not.
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => {
            assert!(
                matches!(e, constrain::DfaError::TooBig { .. }),
                "{label}: only one build failed: {e}"
            );
            return false;
        }
    };
    if let Some(w) = first_difference(&ours, &reference) {
        panic!(
            "{label}: the DFAs differ on {:?} (ours accepts: {})",
            String::from_utf8_lossy(&w),
            ours.matches(&w)
        );
    }
    assert!(
        ours.state_count() <= reference.state_count(),
        "{label}: {} states vs {}",
        ours.state_count(),
        reference.state_count()
    );
    true
}

fn schema_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "json"));
    v.sort();
    v
}

fn compare_schema(label: &str, value: &serde_json::Value) -> usize {
    let mut n = 0;
    for opts in [SchemaOptions::default(), SchemaOptions::compliant()] {
        if let Ok(c) = schema::compile(value, &opts) {
            n += compare(label, &c.regex) as usize;
        }
    }
    n
}

#[test]
fn bundled_schemas_and_grammars() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for f in schema_files(&root.join("schemas")) {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        n += compare_schema(&f.display().to_string(), &v);
    }
    for f in std::fs::read_dir(root.join("grammars")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "regex") {
            let g = constrain::grammar::Grammar::load(&f).unwrap();
            n += compare(&f.display().to_string(), &g.pattern) as usize;
        }
    }
    assert!(n >= 10, "only {n} DFAs compared");
}

#[test]
fn maskbench_schemas() {
    let Some(corpora) = common::corpora() else {
        return;
    };
    let dir = corpora.join("maskbench-dev");
    let files: Vec<PathBuf> = if std::env::var_os("CONSTRAIN_DFA_EQUIV_ALL").is_some() {
        // `CONSTRAIN_DFA_EQUIV_EVERY=K`: every K-th file only.
        let every = std::env::var("CONSTRAIN_DFA_EQUIV_EVERY")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1usize)
            .max(1);
        schema_files(&dir).into_iter().step_by(every).collect()
    } else {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/baselines/maskbench-ci-subset.txt"),
        )
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| dir.join(l))
        .collect()
    };
    let mut n = 0;
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        n += compare_schema(&f.display().to_string(), &v["schema"]);
    }
    eprintln!("{n} DFAs compared over {} files", files.len());
    assert!(n * 2 >= files.len(), "only {n} DFAs compared");
}

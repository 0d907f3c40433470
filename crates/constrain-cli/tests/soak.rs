//! A short `constrain soak` through the real binary: random logits, real
//! generation loop, real Qwen vocabulary, MaskBench schemas; every output must
//! validate. The long run (`--schemas 200 --samples 500`, 100,000 outputs) is
//! a manual `--release` job; this one keeps CI honest.

use constrain_testkit::assets as common;

use std::process::Command;

#[test]
fn short_soak_has_no_failures() {
    let (Some(_), Some(corpora)) = (common::tokenizer_path(), common::corpora()) else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args([
            "soak",
            "--schemas",
            "6",
            "--samples",
            "25",
            "--seed",
            "7",
            "--corpus",
        ])
        .arg(corpora.join("maskbench-dev"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("soak: 150 outputs over 6 schemas, 0 failed"),
        "{last}"
    );
}

#[test]
fn soak_refuses_settings_that_break_validity() {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args(["soak", "--lenient", "--corpus", "."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: ") && err.contains("--lenient"),
        "{err}"
    );
}

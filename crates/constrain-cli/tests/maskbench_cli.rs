//! `constrain maskbench` through the real binary: the summary has exactly the
//! keys the issue names, the JSONL has one line per schema with its phases,
//! `--jobs 2` judges every schema as `--jobs 1` does, and the vocabulary's
//! set-up is reported on its own stderr line before the first schema.

use constrain_testkit::assets as common;

use std::collections::BTreeMap;
use std::process::Command;

fn maskbench(files: &[String], jobs: &str, jsonl: &std::path::Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .arg("maskbench")
        .args(files)
        .args(["--timeout-s", "60", "--jobs", jobs, "--jsonl"])
        .arg(jsonl)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The vocabulary's set-up is reported on its own line, before any schema.
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("set-up: vocabulary of ") && first.contains("(not in TTFM)"),
        "{err}"
    );
    serde_json::from_slice(&out.stdout).expect("summary JSON on stdout")
}

fn outcomes(jsonl: &std::path::Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(jsonl)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["outcome"] != "compile_error" && v["outcome"] != "timeout" {
                let p = &v["phases_us"];
                assert!(
                    p["schema"].is_number() && p["dfa"].is_number() && p["index"].is_number(),
                    "{l}"
                );
            }
            (
                v["name"].as_str().unwrap().to_string(),
                v["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn summary_keys_and_parallel_jobs_agree() {
    let (Some(corpora), Some(_)) = (common::corpora(), common::tokenizer_path()) else {
        eprintln!("skipped: ../shared/corpora or the tokenizer is absent");
        return;
    };
    let dir = corpora.join("maskbench-dev");
    let files: Vec<String> = [
        "BFCL_javascript_0.json",
        "BFCL_simple_10.json",
        "Github_easy---o45261.json",
        "Glaiveai2K---calculate_area_30108955.json",
        "Handwritten---allOfPProp10.json",
    ]
    .iter()
    .map(|f| dir.join(f).to_string_lossy().into_owned())
    .collect();
    let tmp = std::env::temp_dir().join(format!("constrain-mb-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let one = maskbench(&files, "1", &tmp.join("one.jsonl"));
    let two = maskbench(&files, "2", &tmp.join("two.jsonl"));
    let keys: Vec<&str> = one
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "schemas",
            "passing",
            "compile_error",
            "timeout",
            "valid_rejected",
            "invalid_accepted",
            "tokens",
            "ttfm_us",
            "tbm_us"
        ]
    );
    assert_eq!(one["schemas"], 5);
    assert_eq!(one["invalid_accepted"], 0);
    for k in ["p50", "p90", "p99", "max"] {
        assert!(one["ttfm_us"][k].is_number() && one["tbm_us"][k].is_number());
    }
    for k in [
        "schemas",
        "passing",
        "compile_error",
        "valid_rejected",
        "tokens",
    ] {
        assert_eq!(one[k], two[k], "{k}");
    }
    let a = outcomes(&tmp.join("one.jsonl"));
    assert_eq!(a.len(), 5);
    assert_eq!(a, outcomes(&tmp.join("two.jsonl")));
    let _ = std::fs::remove_dir_all(&tmp);
}

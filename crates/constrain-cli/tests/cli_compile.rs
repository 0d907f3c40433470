//! `constrain compile` and `constrain check` through the real binary.

use constrain_testkit::assets as common;

use std::process::Command;

fn constrain(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn grammar(name: &str) -> String {
    format!("{}/grammars/{name}.regex", common::repo_root().display())
}

#[test]
fn compile_prints_figures_as_json() {
    if common::tokenizer_path().is_none() {
        return;
    }
    let (code, out, err) = constrain(&["compile", "--grammar", &grammar("uuid"), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for key in [
        "dfa_states",
        "index_states",
        "distinct_masks",
        "build_ms",
        "index_memory_bytes",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {out}");
    }
    assert!(
        v["index_states"].as_u64().unwrap() >= 36,
        "a UUID needs at least 36 states"
    );
    assert!(v["distinct_masks"].as_u64().unwrap() <= v["index_states"].as_u64().unwrap());
    let (code, out, _) = constrain(&["compile", "--regex", "yes|no"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("index states:") && out.contains("distinct masks:"),
        "{out}"
    );
}

#[test]
fn check_accepts_and_rejects_with_position() {
    if common::tokenizer_path().is_none() {
        return;
    }
    let (code, out, _) = constrain(&[
        "check",
        "--grammar",
        &grammar("ipv4"),
        "--text",
        "10.0.0.255",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("accepted"));
    let (code, out, _) = constrain(&[
        "check",
        "--grammar",
        &grammar("ipv4"),
        "--text",
        "10.0.0.256",
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("token") && out.contains("byte 9"), "{out}");
    let (code, out, _) = constrain(&["check", "--regex", "北京|東京", "--text", "北"]);
    assert_eq!(code, 1, "incomplete text: {out}");
    let (code, _, _) = constrain(&["check", "--regex", "北京|東京", "--text", "東京"]);
    assert_eq!(code, 0);
}

#[test]
fn bad_input_is_one_error_line_and_exit_2() {
    let cases: Vec<Vec<&str>> = vec![
        vec!["compile", "--regex", "a(b"],
        vec!["compile", "--grammar", "/no/such/file.regex"],
        vec![
            "compile",
            "--regex",
            "a",
            "--tokenizer",
            "/no/such/tokenizer.json",
        ],
        vec!["check", "--regex", "[z-a]", "--text", "x"],
        vec!["compile"],
        vec![
            "compile",
            "--regex",
            "[a-z]{0,300}x[a-z]{30}",
            "--dfa-size-limit",
            "100000",
        ],
    ];
    for args in cases {
        let (code, out, err) = constrain(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: stdout must be empty, got {out}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line, got {err}");
        assert!(lines[0].starts_with("error: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
    let (_, _, err) = constrain(&["compile", "--regex", "ab(c"]);
    assert!(err.contains("byte 2"), "names the position: {err}");
}

/// `--tokenizer` with the other tokenizers (`scripts/fetch-assets --tokenizers`):
/// `compile --json` shows the stop tokens and the logits width, `check`
/// accepts a text tokenized as output (Llama 2: no prepended `▁`), and a
/// `--logits-width` below the id count exits 2 naming both numbers.
#[test]
fn other_tokenizers_compile_check_and_show_their_stop_tokens() {
    let cases = [
        ("gptoss", vec!["<|return|>", "<|call|>", "<|endoftext|>"]),
        ("llama2", vec!["</s>"]),
        ("gemma3", vec!["<eos>", "<end_of_turn>"]),
        ("deepseek_v3", vec!["<｜end▁of▁sentence｜>"]),
    ];
    for (name, stops) in cases {
        let dir = common::constrain_home().join("tokenizers").join(name);
        let tok = dir.join("tokenizer.json");
        if !tok.exists() {
            eprintln!(
                "skipping: {} absent (run scripts/fetch-assets --tokenizers)",
                tok.display()
            );
            continue;
        }
        let tok = tok.to_str().unwrap();
        let (code, out, err) = constrain(&[
            "compile",
            "--regex",
            r#"\{"a": [0-9]+\}"#,
            "--json",
            "--tokenizer",
            tok,
        ]);
        assert_eq!(code, 0, "{name}: {err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        let names: Vec<&str> = v["stop_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["token"].as_str().unwrap())
            .collect();
        for s in &stops {
            assert!(names.contains(s), "{name}: stop_tokens {names:?} lacks {s}");
        }
        let width = v["logits_width"].as_u64().unwrap();
        assert!(width > 30_000, "{name}: logits width {width}");

        let (code, out, err) = constrain(&[
            "check",
            "--regex",
            r#"\{"a": [0-9]+\}"#,
            "--text",
            r#"{"a": 12}"#,
            "--tokenizer",
            tok,
        ]);
        assert_eq!(code, 0, "{name}: {out} {err}");
        assert!(out.starts_with("accepted"), "{name}: {out}");

        let small = (width - 1).to_string();
        let (code, _, err) = constrain(&[
            "compile",
            "--regex",
            "a",
            "--logits-width",
            &small,
            "--tokenizer",
            tok,
        ]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.starts_with("error:") && err.contains("smaller than the tokenizer"),
            "{name}: {err}"
        );
    }
}

//! Structural tags through the real binary: `check --structural-tag FILE
//! --text ...` (exit 0 accepted, 1 rejected, 2 bad input with one `error:`
//! line naming the JSON Pointer) and `compile --structural-tag FILE --json`.

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

fn tag(file: &str) -> String {
    format!("{}/grammars/tags/{file}", common::repo_root().display())
}

#[test]
fn check_and_compile_structural_tags() {
    if common::tokenizer_path().is_none() {
        eprintln!("skipping: the Qwen tokenizer is not fetched (scripts/fetch-assets)");
        return;
    }
    let think = tag("think-then-answer.json");
    let ok = constrain(&[
        "check",
        "--structural-tag",
        &think,
        "--text",
        "<think>so</think>\nAnswer: no",
    ]);
    assert_eq!(ok.0, 0, "{ok:?}");
    let bad = constrain(&[
        "check",
        "--structural-tag",
        &think,
        "--text",
        "<think>so</think>\nAnswer: maybe",
    ]);
    assert_eq!(bad.0, 1, "{bad:?}");
    assert!(bad.1.starts_with("rejected"), "{bad:?}");
    let weather = tag("weather-call.json");
    let call = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}\n</tool_call>";
    let (code, out, err) = constrain(&["check", "--structural-tag", &weather, "--text", call]);
    assert_eq!(code, 0, "{out} {err}");
    let (code, out, _) = constrain(&["compile", "--structural-tag", &weather, "--json"]);
    assert_eq!(code, 0);
    let stats: serde_json::Value =
        serde_json::from_str(out.trim()).expect("compile --json prints JSON");
    assert!(stats.is_object(), "{out}");
}

#[test]
fn a_bad_tag_is_one_error_line_with_its_pointer() {
    if common::tokenizer_path().is_none() {
        eprintln!("skipping: the Qwen tokenizer is not fetched (scripts/fetch-assets)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("constrain-tag-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.json");
    std::fs::write(
        &file,
        r#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
            "tags": [{"begin": "<g>", "content": {"type": "const_string", "value": "x"}, "end": "</g>"}]}}"#,
    )
    .unwrap();
    let (code, out, err) = constrain(&[
        "check",
        "--structural-tag",
        file.to_str().unwrap(),
        "--text",
        "x",
    ]);
    assert_eq!(code, 2, "{out} {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error:") && err.contains("/format/tags/0/begin"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

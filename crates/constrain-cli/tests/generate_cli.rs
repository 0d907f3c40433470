//! The main job of the binary: stdout carries only the output (one line),
//! bad input is exit 2 with one `error:` line and nothing on stdout. Runs
//! offline on tiny random-weight GGUF files; the real-model cases skip when
//! the asset is missing.

use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
use std::path::PathBuf;
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("constrain-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn tiny(arch: &str) -> PathBuf {
    let p = tmp(&format!("tiny-{arch}.gguf"));
    if !p.exists() {
        let spec = TinySpec {
            arch: arch.into(),
            ..TinySpec::default()
        };
        write_tiny_gguf(&p, &spec).unwrap();
    }
    p
}

fn constrain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args(args)
        .env("CONSTRAIN_HOME", tmp("empty-home"))
        .output()
        .unwrap()
}

fn bad_input(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let last = err.lines().last().unwrap_or("");
    assert!(last.starts_with("error: "), "{err}");
    assert!(last.contains(needle), "expected {needle:?} in {last:?}");
}

#[test]
fn tiny_qwen3_generates_a_matching_line() {
    let m = tiny("qwen3");
    let m = m.to_str().unwrap();
    for (re, seed) in [
        ("[ab]{5}", "1"),
        ("(yes|no)", "2"),
        (r#"\{"n":[0-9]{2}\}"#, "3"),
    ] {
        for extra in [
            &["--greedy"][..],
            &["--temperature", "0.7", "--top-k", "5", "--seed", seed][..],
            &["--stream", "--raw"][..],
        ] {
            let mut args = vec![
                "--model",
                m,
                "--regex",
                re,
                "--prompt",
                "hello",
                "--max-tokens",
                "20",
            ];
            args.extend_from_slice(extra);
            let out = constrain(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{args:?}: {stderr}");
            let text = String::from_utf8(out.stdout).unwrap();
            assert!(
                text.ends_with('\n') && text.lines().count() == 1,
                "{text:?}"
            );
            let line = text.trim_end_matches('\n');
            assert!(
                regex::Regex::new(&format!("^({re})$"))
                    .unwrap()
                    .is_match(line),
                "{re}: {line:?}"
            );
            // The summary line is on stderr.
            assert!(
                stderr.contains("tokens") && stderr.contains("decode"),
                "{stderr}"
            );
        }
    }
}

#[test]
fn forced_output_is_complete_without_sampling() {
    let m = tiny("qwen2");
    let out = constrain(&[
        "--model",
        m.to_str().unwrap(),
        "--regex",
        r#"\{"name":"x"\}"#,
        "--prompt",
        "p",
        "--greedy",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"{\"name\":\"x\"}\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("forced"));
}

#[test]
fn bad_input_is_exit_2_with_nothing_on_stdout() {
    let m = tiny("qwen3");
    let m = m.to_str().unwrap();
    bad_input(&constrain(&["--regex", "a"]), "--prompt");
    bad_input(&constrain(&["--prompt", "hi"]), "--schema");
    bad_input(
        &constrain(&["--regex", "a", "--prompt", "hi"]),
        "does not exist (scripts/fetch-assets",
    );
    // The constraint is checked before the model loads: a bad regex with a
    // missing model names the regex.
    bad_input(
        &constrain(&[
            "--regex",
            "a(",
            "--prompt",
            "hi",
            "--model",
            "/no/such.gguf",
        ]),
        "bad regex at byte",
    );
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            "/nonexistent/m.gguf",
        ]),
        "/nonexistent/m.gguf",
    );
    let garbage = tmp("garbage.gguf");
    std::fs::write(&garbage, b"GGUF but not really").unwrap();
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            garbage.to_str().unwrap(),
        ]),
        "not a valid GGUF",
    );
    let bytes = std::fs::read(m).unwrap();
    let cut = tmp("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            cut.to_str().unwrap(),
        ]),
        "truncated",
    );
    let llama = tmp("llama.gguf");
    write_tiny_gguf(
        &llama,
        &TinySpec {
            arch: "llama".into(),
            ..TinySpec::default()
        },
    )
    .unwrap();
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            llama.to_str().unwrap(),
        ]),
        "architecture",
    );
    // Budget below what the constraint needs: the minimum is named.
    bad_input(
        &constrain(&[
            "--regex",
            "[ab]{30}",
            "--prompt",
            "hi",
            "--model",
            m,
            "--max-tokens",
            "3",
        ]),
        "at least",
    );
    // The prompt does not fit the context (tiny model: 512 tokens).
    let long = "word ".repeat(400);
    bad_input(
        &constrain(&["--regex", "a", "--prompt", &long, "--model", m, "--raw"]),
        "context",
    );
    // Invalid inputs to the constraint and sampling flags.
    let bad_schema = tmp("bad.json");
    std::fs::write(&bad_schema, b"{ not json").unwrap();
    bad_input(
        &constrain(&[
            "--schema",
            bad_schema.to_str().unwrap(),
            "--prompt",
            "hi",
            "--model",
            m,
        ]),
        "not valid JSON",
    );
    bad_input(
        &constrain(&[
            "--tools",
            bad_schema.to_str().unwrap(),
            "--prompt",
            "hi",
            "--model",
            m,
        ]),
        "not valid JSON",
    );
    bad_input(
        &constrain(&["--regex", "(", "--prompt", "hi", "--model", m]),
        "",
    );
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            m,
            "--logit-bias",
            "5=x",
        ]),
        "not a number",
    );
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            m,
            "--logit-bias",
            "99999=1",
        ]),
        "outside",
    );
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            m,
            "--threads",
            "0",
        ]),
        "thread",
    );
    bad_input(&constrain(&["--regex", "a", "--regex-typo", "x"]), "");
}

#[test]
fn tokenizer_that_does_not_match_the_model_is_rejected() {
    let home = match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        }
    };
    let json = home.join("tokenizer.json");
    if !json.exists() {
        eprintln!("skipping: {} not found", json.display());
        return;
    }
    let m = tiny("qwen3");
    bad_input(
        &constrain(&[
            "--regex",
            "a",
            "--prompt",
            "hi",
            "--model",
            m.to_str().unwrap(),
            "--tokenizer",
            json.to_str().unwrap(),
        ]),
        "does not match the model",
    );
}

/// The calls `<tool_call>\n{...}\n</tool_call>` in an output, parsed.
fn qwen_calls(out: &str) -> Vec<serde_json::Value> {
    out.split("<tool_call>\n")
        .skip(1)
        .map(|rest| {
            let body = rest.split("\n</tool_call>").next().unwrap();
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{out:?}: {body:?}: {e}"))
        })
        .collect()
}

fn tools_path() -> String {
    format!("{}/../../schemas/tools.json", env!("CARGO_MANIFEST_DIR"))
}

/// One call required of `model` with the example tools, then `extra`.
fn one_required_call(model: &str, extra: &[&str]) -> Output {
    let tools = tools_path();
    let mut args = vec![
        "--tools",
        &tools,
        "--tool-choice",
        "required",
        "--one-call",
        // The tools' system message is past the tiny model's context.
        "--system",
        "Call a tool.",
        "--prompt",
        "hi",
        "--model",
        model,
        "--max-tokens",
        "200",
    ];
    args.extend_from_slice(extra);
    constrain(&args)
}

#[test]
fn the_tool_format_comes_from_the_models_chat_template() {
    // A model whose template writes Llama's calls: without --tool-format,
    // the calls are Llama's JSON objects, not Qwen's <tool_call> blocks.
    let p = tmp("tiny-llama-template.gguf");
    if !p.exists() {
        let spec = TinySpec {
            chat_template: Some(
                "{% if tools %}<|python_tag|>{{ tool_call | tojson }}{% endif %}".into(),
            ),
            ..TinySpec::default()
        };
        write_tiny_gguf(&p, &spec).unwrap();
    }
    let run = |model: &str, extra: &[&str]| {
        let out = one_required_call(model, &[&["--seed", "1"], extra].concat());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (text, err) = run(p.to_str().unwrap(), &[]);
    assert!(err.contains("tool format: llama"), "{err}");
    assert!(!text.contains("<tool_call>"), "{text:?}");
    let call = text.trim().trim_start_matches("<|python_tag|>");
    let v: serde_json::Value =
        serde_json::from_str(call).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert!(
        v["name"].is_string() && v["parameters"].is_object(),
        "{text:?}"
    );
    // --tool-format overrides it.
    let (text, _) = run(p.to_str().unwrap(), &["--tool-format", "qwen_3"]);
    assert!(text.starts_with("<tool_call>\n"), "{text:?}");
}

#[test]
fn tools_in_the_models_own_format_under_random_weights() {
    let m = tiny("qwen3");
    let m = m.to_str().unwrap();
    let tools_path = tools_path();
    let tools: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tools_path).unwrap()).unwrap();
    let params = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == name)
            .map(|t| jsonschema::validator_for(&t["function"]["parameters"]).unwrap())
    };
    for seed in ["1", "2", "3"] {
        let out = one_required_call(m, &["--temperature", "1", "--seed", seed]);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = text.strip_suffix('\n').unwrap_or(&text);
        assert!(
            text.starts_with("<tool_call>\n") && text.ends_with("\n</tool_call>"),
            "{text:?}"
        );
        let calls = qwen_calls(text);
        assert_eq!(calls.len(), 1, "{text:?}");
        let name = calls[0]["name"].as_str().unwrap();
        let v = params(name).unwrap_or_else(|| panic!("no tool {name:?}"));
        assert!(v.is_valid(&calls[0]["arguments"]), "{text:?}");
        // `none`: text that never opens a call.
        let out = constrain(&[
            "--tools",
            &tools_path,
            "--tool-choice",
            "none",
            "--system",
            "Answer.",
            "--prompt",
            "hi",
            "--model",
            m,
            "--max-tokens",
            "40",
            "--temperature",
            "1",
            "--seed",
            seed,
        ]);
        assert_eq!(out.status.code(), Some(0));
        assert!(!String::from_utf8_lossy(&out.stdout).contains("<tool_call>"));
    }
    bad_input(
        &constrain(&[
            "--tools",
            &tools_path,
            "--tool-format",
            "nope",
            "--prompt",
            "hi",
            "--model",
            m,
        ]),
        "unknown --tool-format",
    );
}

#[test]
fn a_thinking_budget_closes_the_thinking_in_time() {
    let m = tiny("qwen3");
    let m = m.to_str().unwrap();
    for (budget, seed) in [("0", "1"), ("3", "2"), ("3", "3")] {
        let out = one_required_call(
            m,
            &[
                "--reasoning",
                "--thinking-budget",
                budget,
                "--temperature",
                "1",
                "--seed",
                seed,
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let (thinking, rest) = text
            .split_once("</think>\n\n")
            .unwrap_or_else(|| panic!("the thinking is closed: {text:?}"));
        if budget == "0" {
            assert_eq!(thinking, "", "no thinking at a budget of 0: {text:?}");
        }
        assert!(rest.starts_with("<tool_call>\n"), "{text:?}");
        assert_eq!(qwen_calls(rest.trim_end()).len(), 1, "{text:?}");
    }
    // The budget needs the thinking.
    let out = one_required_call(m, &["--thinking-budget", "3"]);
    assert_eq!(out.status.code(), Some(2));
}

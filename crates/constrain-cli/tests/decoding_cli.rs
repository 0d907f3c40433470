//! `--trace FILE` and `--beam N` on the main job, on a tiny random-weight
//! GGUF model (offline): the trace leaves stdout unchanged and has the
//! documented fields; `--beam 1` equals `--greedy`; `--beam N` outputs match
//! the constraint; `--trace` with `--beam` writes the output's steps and its
//! score (also on the real Qwen2.5-Coder-0.5B, skipped with a message when
//! its GGUF file is absent); bad values are exit 2 with one `error:` line.

use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
use std::path::PathBuf;
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("constrain-decoding-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn tiny() -> PathBuf {
    let p = tmp("tiny-qwen2.gguf");
    if !p.exists() {
        write_tiny_gguf(&p, &TinySpec::default()).unwrap();
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

fn ok_stdout(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn bad_input(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(out.stdout.is_empty());
    let last = err.lines().last().unwrap_or("");
    assert!(last.starts_with("error: "), "{err}");
    assert!(
        err.lines().filter(|l| l.starts_with("error")).count() == 1,
        "{err}"
    );
    assert!(last.contains(needle), "expected {needle:?} in {last:?}");
}

const RE: &str = r#"\{"n":[0-9]{1,3},"ok":(true|false)\}"#;

#[test]
fn trace_leaves_stdout_unchanged_and_has_the_fields() {
    let m = tiny();
    let m = m.to_str().unwrap();
    for extra in [
        &["--greedy"][..],
        &["--temperature", "0.8", "--seed", "5"][..],
    ] {
        let mut args = vec![
            "--model",
            m,
            "--regex",
            RE,
            "--prompt",
            "hi",
            "--max-tokens",
            "30",
        ];
        args.extend_from_slice(extra);
        let plain = ok_stdout(&constrain(&args), "plain");
        let trace = tmp("trace.json");
        let t = trace.to_str().unwrap();
        let mut targs = args.clone();
        targs.extend_from_slice(&["--trace", t]);
        let traced = ok_stdout(&constrain(&targs), "traced");
        assert_eq!(plain, traced);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["model", "prompt", "settings", "steps", "sequence_logprob"]
        );
        assert_eq!(v["model"], m);
        assert_eq!(v["prompt"], "hi");
        assert_eq!(v["settings"]["max_tokens"], 30);
        let steps = v["steps"].as_array().unwrap();
        // The steps' bytes are the output.
        let bytes: Vec<u8> = steps
            .iter()
            .flat_map(|s| s["token"]["bytes"].as_array().unwrap().clone())
            .map(|b| b.as_u64().unwrap() as u8)
            .collect();
        assert_eq!(String::from_utf8(bytes).unwrap(), plain.trim_end());
        let sum: f64 = steps.iter().map(|s| s["logprob"].as_f64().unwrap()).sum();
        assert!((v["sequence_logprob"].as_f64().unwrap() - sum).abs() < 1e-9);
        for s in steps {
            if s["forced"] == true {
                assert_eq!(s["top"], serde_json::json!([]));
                assert_eq!(s["logprob"], 0.0);
            } else {
                assert_eq!(s["top"].as_array().unwrap().len(), 16);
                assert!(s["logprob"].as_f64().unwrap() <= 0.0);
                let mass = s["allowed_mass"].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&mass));
                assert!(s["allowed_count"].as_u64().unwrap() >= 1);
            }
        }
        // And it renders.
        let page = tmp("trace.html");
        let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
            .args(["view", t, "-o", page.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success());
        let html = std::fs::read_to_string(&page).unwrap();
        assert_eq!(
            html.matches("<section class=\"ci-step\" data-step=")
                .count(),
            steps.len()
        );
    }
}

#[test]
fn beam_one_equals_greedy_and_beams_match_the_constraint() {
    let m = tiny();
    let m = m.to_str().unwrap();
    let base = [
        "--model",
        m,
        "--regex",
        RE,
        "--prompt",
        "hi",
        "--max-tokens",
        "20",
    ];
    let greedy = ok_stdout(&constrain(&[&base[..], &["--greedy"]].concat()), "greedy");
    let beam1 = ok_stdout(
        &constrain(&[&base[..], &["--beam", "1"]].concat()),
        "beam 1",
    );
    assert_eq!(greedy, beam1);
    let re = regex::Regex::new(&format!("^(?:{RE})\n$")).unwrap();
    for extra in [
        &["--beam", "3"][..],
        &["--beam", "2", "--length-penalty", "0"][..],
    ] {
        let out = constrain(&[&base[..], extra].concat());
        let text = ok_stdout(&out, "beam");
        assert!(re.is_match(&text), "{extra:?}: {text:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("score"), "{err}");
    }
    // Tight budget (14 is the least this constraint needs): still complete.
    let text = ok_stdout(
        &constrain(&[
            "--model",
            m,
            "--regex",
            RE,
            "--prompt",
            "hi",
            "--max-tokens",
            "14",
            "--beam",
            "3",
        ]),
        "tight",
    );
    assert!(re.is_match(&text), "{text:?}");
}

#[test]
fn bad_decoding_values_exit_2() {
    let m = tiny();
    let m = m.to_str().unwrap();
    let base = ["--model", m, "--regex", RE, "--prompt", "hi"];
    bad_input(
        &constrain(&[&base[..], &["--beam", "0"]].concat()),
        "--beam",
    );
    bad_input(
        &constrain(&[&base[..], &["--beam", "-2"]].concat()),
        "--beam",
    );
    bad_input(
        &constrain(&[&base[..], &["--beam", "2", "--length-penalty", "x"]].concat()),
        "--length-penalty",
    );
    bad_input(
        &constrain(&[&base[..], &["--length-penalty", "2"]].concat()),
        "--beam",
    );
    bad_input(
        &constrain(&[&base[..], &["--trace", "/nonexistent-dir/t.json"]].concat()),
        "/nonexistent-dir/t.json",
    );
    // The strategies that do not combine with beam search (docs/decoding.md).
    bad_input(
        &constrain(&[&base[..], &["--beam", "2", "--guidance-scale", "2"]].concat()),
        "--guidance-scale",
    );
    bad_input(
        &constrain(&[&base[..], &["--beam", "2", "--contrastive-model", m]].concat()),
        "--contrastive-model",
    );
}

/// The number after `key ` in the beam summary line on stderr.
fn summary_number(err: &str, key: &str) -> f64 {
    let line = err
        .lines()
        .find(|l| l.starts_with("beam "))
        .unwrap_or_else(|| panic!("no beam summary in {err}"));
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"));
    line[at + key.len()..]
        .trim_start()
        .split([' ', ',', ')'])
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {key:?} in {line:?}"))
}

/// `args` with `--beam`, run plain and traced: the same stdout; the trace
/// has one step per output token (and one for the EOS that ended it, with
/// no bytes), the steps spell the output, and its score is the one the
/// summary reports and `sequence_logprob / steps^A`. It renders.
fn check_beam_trace(args: &[&str], a: f64, name: &str) {
    let plain = ok_stdout(&constrain(args), "beam");
    let trace = tmp(name);
    let t = trace.to_str().unwrap();
    let out = constrain(&[args, &["--trace", t]].concat());
    let traced = ok_stdout(&out, "beam traced");
    assert_eq!(plain, traced, "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "model",
            "prompt",
            "settings",
            "steps",
            "sequence_logprob",
            "score",
            "length_penalty"
        ]
    );
    assert_eq!(v["length_penalty"].as_f64().unwrap(), a);
    assert_eq!(v["settings"]["length_penalty"].as_f64().unwrap(), a);
    let beams = args[args.iter().position(|&x| x == "--beam").unwrap() + 1];
    assert_eq!(v["settings"]["beam"], beams.parse::<u64>().unwrap());
    let steps = v["steps"].as_array().unwrap();
    let tokens = summary_number(&err, ":") as usize;
    let bytes_of = |s: &serde_json::Value| -> Vec<u8> {
        s["token"]["bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as u8)
            .collect()
    };
    assert!(
        steps.len() == tokens || (steps.len() == tokens + 1 && bytes_of(&steps[tokens]).is_empty()),
        "{} steps for {tokens} tokens",
        steps.len()
    );
    let bytes: Vec<u8> = steps.iter().flat_map(bytes_of).collect();
    assert_eq!(String::from_utf8(bytes).unwrap(), plain.trim_end());
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["step"], i);
        assert!(s["logprob"].as_f64().unwrap() <= 0.0);
        if s["forced"] == true {
            assert_eq!(s["top"], serde_json::json!([]));
        } else {
            assert_eq!(s["top"].as_array().unwrap().len(), 16);
        }
    }
    let lp = v["sequence_logprob"].as_f64().unwrap();
    let score = v["score"].as_f64().unwrap();
    let want = lp / (steps.len() as f64).powf(a);
    assert!((score - want).abs() < 1e-9, "score {score} vs {want}");
    let reported = summary_number(&err, "score");
    assert!(
        (score - reported).abs() <= 6e-5,
        "{score} vs {reported}: {err}"
    );
    let reported_lp = summary_number(&err, "log p");
    assert!(
        (lp - reported_lp).abs() <= 6e-5,
        "{lp} vs {reported_lp}: {err}"
    );
    let page = tmp(&format!("{name}.html"));
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args(["view", t, "-o", page.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<section class=\"ci-step\" data-step=")
            .count(),
        steps.len()
    );
    assert!(html.contains(&format!("beam score {score:.4}")), "{name}");
}

#[test]
fn trace_combines_with_beam() {
    let m = tiny();
    let m = m.to_str().unwrap();
    let base = [
        "--model",
        m,
        "--regex",
        RE,
        "--prompt",
        "hi",
        "--max-tokens",
        "20",
    ];
    check_beam_trace(&[&base[..], &["--beam", "2"]].concat(), 1.0, "b2.json");
    check_beam_trace(
        &[&base[..], &["--beam", "3", "--length-penalty", "0"]].concat(),
        0.0,
        "b3.json",
    );
    check_beam_trace(&[&base[..], &["--beam", "1"]].concat(), 1.0, "b1.json");
    check_beam_trace(
        &[&base[..], &["--beam", "2", "--no-jump-forward"]].concat(),
        1.0,
        "b2nj.json",
    );
}

#[test]
fn trace_combines_with_beam_on_the_real_model() {
    let model =
        constrain_testkit::assets::constrain_home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !model.exists() {
        eprintln!(
            "skipping: {} not found (run scripts/fetch-assets)",
            model.display()
        );
        return;
    }
    check_beam_trace(
        &[
            "--model",
            model.to_str().unwrap(),
            "--regex",
            r#"\{"n":[0-9]{1,3},"ok":(true|false)\}"#,
            "--prompt",
            "Give a number and whether it is ok.",
            "--max-tokens",
            "20",
            "--beam",
            "2",
        ],
        1.0,
        "real-b2.json",
    );
}

//! `constrain beam`, run as the built binary.

use std::path::PathBuf;
use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .arg("beam")
        .args(args)
        .output()
        .expect("run constrain");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Writes `text` to a fresh file in the target dir and returns its path.
fn file(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("beam_cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const CLASSIC: &str = r#"{
  "A": {"p": 0.40, "next": {"x": {"p": 0.50}, "y": {"p": 0.30}, "z": {"p": 0.20}}},
  "B": {"p": 0.35, "next": {"x": {"p": 0.90}, "y": {"p": 0.10}}},
  "C": {"p": 0.25, "next": {"x": {"p": 0.60}, "y": {"p": 0.40}}}
}"#;

fn close(v: &serde_json::Value, want: f64) -> bool {
    (v.as_f64().unwrap() - want).abs() < 1e-9
}

#[test]
fn classic_worked_example_json() {
    let tree = file("classic.json", CLASSIC);
    let (code, out, err) = run(&["--tree", tree.to_str().unwrap(), "--beam", "2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["greedy"]["tokens"], serde_json::json!(["A", "x"]));
    assert!(close(&v["greedy"]["prob"], 0.20), "{v}");
    assert!(close(&v["greedy"]["logprob"], 0.20f64.ln()), "{v}");
    assert_eq!(v["beam"]["tokens"], serde_json::json!(["B", "x"]));
    assert!(close(&v["beam"]["prob"], 0.315), "{v}");
    assert!(close(&v["beam"]["logprob"], 0.315f64.ln()), "{v}");
    // Default length penalty 1: log p / 2.
    assert!(close(&v["beam"]["score"], 0.315f64.ln() / 2.0), "{v}");
    // Exactly the documented keys.
    let keys: Vec<&String> = v["beam"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tokens", "prob", "logprob", "score"]);
    let keys: Vec<&String> = v["greedy"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tokens", "prob", "logprob"]);
}

#[test]
fn width_one_equals_greedy() {
    let tree = file("classic1.json", CLASSIC);
    let (code, out, err) = run(&["--tree", tree.to_str().unwrap(), "--beam", "1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["beam"]["tokens"], v["greedy"]["tokens"]);
}

#[test]
fn length_penalty_flag_changes_the_winner() {
    let tree = file(
        "long.json",
        r#"{"A": {"p": 0.5, "next": {"y": {"p": 0.95, "next": {"z": {"p": 0.95}}}}}, "B": {"p": 0.5}}"#,
    );
    let t = tree.to_str().unwrap();
    let (code, out, _) = run(&[
        "--tree",
        t,
        "--beam",
        "2",
        "--length-penalty",
        "0",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["beam"]["tokens"], serde_json::json!(["B"]));
    let (code, out, _) = run(&["--tree", t, "--beam", "2", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["beam"]["tokens"], serde_json::json!(["A", "y", "z"]));
}

#[test]
fn text_explains_the_steps() {
    let tree = file("classic2.json", CLASSIC);
    let (code, out, err) = run(&["--tree", tree.to_str().unwrap(), "--beam", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("step 1"), "{out}");
    assert!(out.contains("pruned"), "{out}");
    let greedy = out.lines().find(|l| l.starts_with("greedy")).unwrap();
    assert!(
        greedy.contains("A x") && greedy.contains("p = 0.2000"),
        "{out}"
    );
    let beam = out.lines().find(|l| l.starts_with("beam (")).unwrap();
    assert!(beam.contains("B x") && beam.contains("p = 0.3150"), "{out}");
}

fn assert_one_error_line(code: i32, out: &str, err: &str, needle: &str) {
    assert_eq!(code, 2, "stderr: {err}");
    assert!(out.is_empty(), "stdout: {out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains(needle), "{err} lacks {needle}");
}

#[test]
fn bad_values_exit_2_with_one_error_line() {
    let tree = file("classic3.json", CLASSIC);
    let t = tree.to_str().unwrap();
    let (c, o, e) = run(&["--tree", t, "--beam", "0"]);
    assert_one_error_line(c, &o, &e, "--beam");
    let (c, o, e) = run(&["--tree", t, "--beam", "-1"]);
    assert_one_error_line(c, &o, &e, "--beam");
    let (c, o, e) = run(&["--tree", t, "--beam", "2", "--length-penalty", "nan"]);
    assert_one_error_line(c, &o, &e, "--length-penalty");
    let bad = file(
        "bad_p.json",
        r#"{"A": {"p": 0.4, "next": {"x": {"p": 1.5}}}}"#,
    );
    let (c, o, e) = run(&["--tree", bad.to_str().unwrap(), "--beam", "2"]);
    assert_one_error_line(c, &o, &e, "/A/next/x/p");
    let bad = file("not_json.json", "{\"A\": {\"p\": 0.4,,}}");
    let (c, o, e) = run(&["--tree", bad.to_str().unwrap(), "--beam", "2"]);
    assert_one_error_line(c, &o, &e, "line 1");
    let (c, o, e) = run(&["--tree", "/nonexistent/tree.json", "--beam", "2"]);
    assert_one_error_line(c, &o, &e, "/nonexistent/tree.json");
    let bad = file("sum.json", r#"{"A": {"p": 0.7}, "B": {"p": 0.7}}"#);
    let (c, o, e) = run(&["--tree", bad.to_str().unwrap(), "--beam", "2"]);
    assert_one_error_line(c, &o, &e, "sum to");
}

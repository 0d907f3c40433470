//! `constrain distribution`, run as the built binary.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .arg("distribution")
        .args(args)
        .output()
        .expect("run constrain");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn probs(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn json_has_tokens_stages_and_final() {
    let (code, out, err) = run(&[
        "--logits",
        "6,5,4.5,3.5,2,0",
        "--labels",
        "mat,sofa,floor,bed,moon,banana",
        "--temperature",
        "0.7",
        "--top-k",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["tokens"],
        serde_json::json!(["mat", "sofa", "floor", "bed", "moon", "banana"])
    );
    let stages = v["stages"].as_array().unwrap();
    let names: Vec<&str> = stages
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["logits", "temperature", "top_k"]);
    for s in stages {
        let p = probs(&s["probs"]);
        assert_eq!(p.len(), 6);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-5);
    }
    // Softmax of 6/0.7, 5/0.7, 4.5/0.7 over the three survivors.
    let fin = probs(&v["final"]);
    let want = [0.736936, 0.176607, 0.086457, 0.0, 0.0, 0.0];
    for (g, w) in fin.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{fin:?}");
    }
    // After temperature alone, every token is still there.
    assert!(probs(&stages[1]["probs"]).iter().all(|&p| p > 0.0));
}

#[test]
fn penalties_and_bias_show_up_as_stages() {
    let (code, out, err) = run(&[
        "--logits=-1,2,0.5",
        "--history",
        "1,1",
        "--frequency-penalty",
        "1",
        "--logit-bias",
        "2=-inf",
        "--temperature",
        "0",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["logits", "logit_bias", "penalties", "temperature"]);
    // Bias removes token 2; two repeats cost token 1 two logits: 0 vs -1 → greedy picks 1 still.
    assert_eq!(probs(&v["stages"][1]["probs"])[2], 0.0);
    assert_eq!(probs(&v["final"]), [0.0, 1.0, 0.0]);
}

#[test]
fn the_table_has_a_bar_per_token() {
    let (code, out, _) = run(&["--logits", "2,1", "--labels", "yes,no", "--top-p", "0.5"]);
    assert_eq!(code, 0);
    assert!(out.contains("top_p"));
    assert!(out.lines().any(|l| l.contains("yes") && l.contains('█')));
    assert!(out.contains("removed"));
}

#[test]
fn bad_values_exit_2_with_one_error_line() {
    for args in [
        &["--logits", "6,5", "--top-p", "1.5"][..],
        &["--logits", "6,5", "--temperature", "-1"],
        &["--logits", "6,5", "--min-p", "abc"],
        &["--logits", "6,x"],
        &["--logits", "6,5", "--labels", "a,b,c"],
        &["--logits", "6,5", "--history", "0,7"],
        &["--logits", "6,5", "--logit-bias", "0"],
        &["--logits", "6,5", "--repetition-penalty", "0"],
        &["--logits", "6,5", "--logit-bias", "0=-inf,1=-inf"],
    ] {
        let (code, out, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].starts_with("error: "), "{args:?}: {err}");
    }
    let (_, _, err) = run(&["--logits", "6,5", "--top-p", "1.5"]);
    assert!(err.contains("top_p") && err.contains("1.5"), "{err}");
}

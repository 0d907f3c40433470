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

#[test]
fn draft_logits_show_acceptance_and_residual() {
    let (code, out, err) = run(&["--logits", "2,1,0", "--draft-logits", "0,1,2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let s = &v["speculative"];
    let pt = probs(&s["target"]);
    let pd = probs(&s["draft"]);
    let acc = probs(&s["acceptance"]);
    let res = probs(&s["residual"]);
    // Independent computation: softmax, min(1, pt/pd), max(0, pt - pd) normalised.
    let sm = |l: [f64; 3]| {
        let z: f64 = l.iter().map(|x| x.exp()).sum();
        l.map(|x| x.exp() / z)
    };
    let (wt, wd) = (sm([2.0, 1.0, 0.0]), sm([0.0, 1.0, 2.0]));
    let raw: Vec<f64> = (0..3).map(|i| (wt[i] - wd[i]).max(0.0)).collect();
    let z: f64 = raw.iter().sum();
    for i in 0..3 {
        assert!((pt[i] - wt[i]).abs() < 1e-5 && (pd[i] - wd[i]).abs() < 1e-5);
        assert!((acc[i] - (wt[i] / wd[i]).min(1.0)).abs() < 1e-5, "{acc:?}");
        assert!((res[i] - raw[i] / z).abs() < 1e-5, "{res:?}");
    }
    let rate: f64 = (0..3).map(|i| wt[i].min(wd[i])).sum();
    assert!((s["acceptance_rate"].as_f64().unwrap() - rate).abs() < 1e-5);
    // Text mode has the table.
    let (code, out, _) = run(&["--logits", "2,1,0", "--draft-logits", "0,1,2"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("acceptance") && out.contains("residual"),
        "{out}"
    );
}

#[test]
fn guidance_scale_shows_the_guided_distribution() {
    let (code, out, err) = run(&[
        "--logits",
        "2,1,0",
        "--uncond-logits",
        "1,1,1",
        "--guidance-scale",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // uncond + 3 (cond - uncond) = [4, 1, -2].
    let z: f64 = [4.0f64, 1.0, -2.0].iter().map(|x| x.exp()).sum();
    let want = [4.0f64.exp() / z, 1.0f64.exp() / z, (-2.0f64).exp() / z];
    let fin = probs(&v["final"]);
    let guided = probs(&v["guidance"]["guided"]);
    for i in 0..3 {
        assert!((fin[i] - want[i]).abs() < 1e-5, "{fin:?}");
        assert!((guided[i] - want[i]).abs() < 1e-5, "{guided:?}");
    }
    // G = 1 is the plain distribution.
    let (_, plain, _) = run(&["--logits", "2,1,0", "--json"]);
    let (_, g1, _) = run(&[
        "--logits",
        "2,1,0",
        "--uncond-logits",
        "5,-3,0",
        "--guidance-scale",
        "1",
        "--json",
    ]);
    let plain: serde_json::Value = serde_json::from_str(&plain).unwrap();
    let g1: serde_json::Value = serde_json::from_str(&g1).unwrap();
    assert_eq!(plain["final"], g1["final"]);
    // Text mode says what it did.
    let (code, out, _) = run(&[
        "--logits",
        "2,1,0",
        "--uncond-logits",
        "1,1,1",
        "--guidance-scale",
        "3",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("guidance: classifier-free"), "{out}");
}

#[test]
fn bad_draft_and_guidance_values_exit_2() {
    for args in [
        &["--logits", "2,1,0", "--draft-logits", "0,1"][..],
        &["--logits", "2,1,0", "--draft-logits", "a,b,c"][..],
        &[
            "--logits",
            "2,1,0",
            "--uncond-logits",
            "1,1,1",
            "--guidance-scale",
            "x",
        ][..],
        &[
            "--logits",
            "2,1,0",
            "--uncond-logits",
            "1,1",
            "--guidance-scale",
            "2",
        ][..],
        &["--logits", "2,1,0", "--guidance-scale", "2"][..],
        &[
            "--logits",
            "2,1,0",
            "--uncond-logits",
            "1,1,1",
            "--guidance-scale",
            "inf",
        ][..],
    ] {
        let (code, out, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}

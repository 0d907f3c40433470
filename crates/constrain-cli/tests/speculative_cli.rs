//! `--draft-model` (speculative decoding), `--guidance-scale` and
//! `--contrastive-model` on the main job, on tiny random-weight GGUF models
//! (offline): greedy speculative prints what greedy prints, under either
//! spelling of the flags; the stderr summary has the speculative line; guided
//! outputs match the constraint, `--guidance-scale 1` is plain decoding; bad
//! values, missing or non-GGUF files and a mismatched vocabulary exit 2 with
//! one `error:` line and nothing on stdout.

use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
use std::path::PathBuf;
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("constrain-spec-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn tiny(name: &str, spec: TinySpec) -> String {
    let p = tmp(name);
    if !p.exists() {
        write_tiny_gguf(&p, &spec).unwrap();
    }
    p.to_str().unwrap().to_string()
}

/// The target, a different draft over the same vocabulary, and a model
/// whose logits are wider (another vocabulary size).
fn models() -> (String, String, String) {
    (
        tiny("target.gguf", TinySpec::default()),
        tiny(
            "draft.gguf",
            TinySpec {
                layers: 1,
                seed: 99,
                ..TinySpec::default()
            },
        ),
        tiny(
            "wide.gguf",
            TinySpec {
                pad: 40,
                ..TinySpec::default()
            },
        ),
    )
}

fn constrain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args(args)
        .env("CONSTRAIN_HOME", tmp("empty-home"))
        .output()
        .unwrap()
}

fn ok(out: &Output, what: &str) -> (String, String) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what}: {err}");
    (String::from_utf8(out.stdout.clone()).unwrap(), err)
}

fn bad_input(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(out.stdout.is_empty());
    let last = err.lines().last().unwrap_or("");
    assert!(last.starts_with("error: "), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error")).count(),
        1,
        "{err}"
    );
    assert!(last.contains(needle), "expected {needle:?} in {last:?}");
}

const RE: &str = r#"\{"n":[0-9]{1,3},"ok":(true|false),"w":"[a-z]{1,8}"\}"#;

fn base(m: &str) -> Vec<&str> {
    vec![
        "--model",
        m,
        "--regex",
        RE,
        "--prompt",
        "hi",
        "--max-tokens",
        "40",
    ]
}

#[test]
fn greedy_speculative_prints_the_targets_greedy_output() {
    let (target, draft, _) = models();
    let greedy = ok(
        &constrain(&[&base(&target)[..], &["--greedy"]].concat()),
        "greedy",
    )
    .0;
    let line = regex::Regex::new(
        r"(?m)^speculative: accepted (\d+)/(\d+) draft tokens \((\d+\.\d)%\), mean accepted length \d+\.\d\d$",
    )
    .unwrap();
    for extra in [
        &["--draft-model", &draft, "--draft-tokens", "3"][..],
        &["--model-draft", &draft, "--draft-max", "1"][..],
        &["--draft-model", &draft][..],
        &["--draft-model", &target, "--draft-tokens", "5"][..],
    ] {
        let (out, err) = ok(
            &constrain(&[&base(&target)[..], &["--greedy"], extra].concat()),
            "speculative",
        );
        assert_eq!(out, greedy, "{extra:?}");
        let c = line
            .captures(&err)
            .unwrap_or_else(|| panic!("{extra:?}: {err}"));
        let (a, d): (usize, usize) = (c[1].parse().unwrap(), c[2].parse().unwrap());
        assert!(a <= d && d > 0, "{err}");
        if extra[1] == target {
            assert_eq!(a, d, "the target as its own draft: {err}");
            assert_eq!(&c[3], "100.0");
        }
        assert!(err.contains("tok/s"), "{err}");
    }
}

#[test]
fn sampled_and_guided_outputs_match_the_constraint() {
    let (target, draft, _) = models();
    let re = regex::Regex::new(&format!("^(?:{RE})\n$")).unwrap();
    let plain = ok(
        &constrain(&[&base(&target)[..], &["--seed", "3"]].concat()),
        "plain",
    )
    .0;
    let same = ok(
        &constrain(
            &[
                &base(&target)[..],
                &["--seed", "3", "--guidance-scale", "1"],
            ]
            .concat(),
        ),
        "G = 1",
    )
    .0;
    assert_eq!(plain, same, "--guidance-scale 1 is plain decoding");
    for extra in [
        &[
            "--draft-model",
            &draft,
            "--temperature",
            "0.9",
            "--seed",
            "4",
        ][..],
        &["--guidance-scale", "3", "--negative-prompt", "bad"][..],
        &[
            "--guidance-scale",
            "1.5",
            "--temperature",
            "0.7",
            "--seed",
            "8",
        ][..],
        &["--contrastive-model", &draft, "--greedy"][..],
        &[
            "--contrastive-model",
            &draft,
            "--contrastive-alpha",
            "0.5",
            "--seed",
            "2",
        ][..],
    ] {
        let (out, _) = ok(&constrain(&[&base(&target)[..], extra].concat()), "run");
        assert!(re.is_match(&out), "{extra:?}: {out:?}");
    }
}

#[test]
fn bad_speculative_and_guidance_input_exits_2() {
    let (target, draft, wide) = models();
    let b = base(&target);
    let not_gguf = tmp("not-a-model.gguf");
    std::fs::write(&not_gguf, "this is not a GGUF file\n").unwrap();
    let not_gguf = not_gguf.to_str().unwrap();
    let missing = tmp("missing.gguf");
    let missing = missing.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--draft-model", &draft, "--draft-tokens", "0"],
            "--draft-tokens",
        ),
        (
            vec!["--draft-model", &draft, "--draft-max", "-3"],
            "--draft-tokens",
        ),
        (vec!["--draft-tokens", "2"], "--draft-model"),
        (vec!["--draft-model", missing], "does not exist"),
        (vec!["--model-draft", not_gguf], "draft"),
        (vec!["--draft-model", &wide], "vocabulary"),
        (vec!["--draft-model", &draft, "--beam", "2"], "--beam"),
        (vec!["--guidance-scale", "nan"], "--guidance-scale"),
        (vec!["--guidance-scale", "inf"], "--guidance-scale"),
        (vec!["--guidance-scale", "x"], "--guidance-scale"),
        (vec!["--negative-prompt", "bad"], "--guidance-scale"),
        (
            vec!["--contrastive-model", &draft, "--contrastive-alpha", "1.5"],
            "--contrastive-alpha",
        ),
        (
            vec!["--contrastive-model", &draft, "--contrastive-alpha", "-0.1"],
            "--contrastive-alpha",
        ),
        (vec!["--contrastive-alpha", "0.2"], "--contrastive-model"),
        (vec!["--contrastive-model", missing], "does not exist"),
        (vec!["--contrastive-model", not_gguf], "amateur"),
        (vec!["--contrastive-model", &wide], "vocabulary"),
    ];
    for (extra, needle) in cases {
        bad_input(&constrain(&[&b[..], &extra[..]].concat()), needle);
    }
}

/// `--trace FILE` with `--draft-model`, `--guidance-scale` and
/// `--contrastive-model`: stdout is what the same run prints without it, the
/// trace has one step per output token whose bytes spell stdout, sampled
/// steps carry logits, and its settings name the strategy and whose logits
/// the steps show. Under greedy with a draft, the trace's tokens and forced
/// flags are those of the target traced alone.
#[test]
fn trace_combines_with_speculative_and_guidance() {
    let (target, draft, _) = models();
    let read = |p: &PathBuf| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let tokens = |t: &serde_json::Value| -> Vec<(u64, bool)> {
        t["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["token"]["id"].as_u64().unwrap(),
                    s["forced"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let alone_path = tmp("trace-alone.json");
    let alone_file = alone_path.to_str().unwrap();
    ok(
        &constrain(&[&base(&target)[..], &["--greedy", "--trace", alone_file]].concat()),
        "traced alone",
    );
    let alone = read(&alone_path);
    for (i, (extra, logits)) in [
        (vec!["--draft-model", draft.as_str(), "--greedy"], "target"),
        (
            vec![
                "--draft-model",
                draft.as_str(),
                "--draft-tokens",
                "2",
                "--draft-fixed",
                "--seed",
                "5",
            ],
            "target",
        ),
        (
            vec!["--guidance-scale", "2", "--negative-prompt", "no"],
            "guided",
        ),
        (
            vec!["--contrastive-model", draft.as_str(), "--greedy"],
            "guided",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let path = tmp(&format!("trace-{i}.json"));
        let file = path.to_str().unwrap();
        let plain = ok(
            &constrain(&[&base(&target)[..], &extra[..]].concat()),
            "untraced",
        )
        .0;
        let (out, _) = ok(
            &constrain(&[&base(&target)[..], &extra[..], &["--trace", file]].concat()),
            "traced",
        );
        assert_eq!(out, plain, "{extra:?}: --trace changed stdout");
        let t = read(&path);
        assert_eq!(t["settings"]["logits"], logits, "{extra:?}");
        let steps = t["steps"].as_array().unwrap();
        let spelled: Vec<u8> = steps
            .iter()
            .flat_map(|s| {
                s["token"]["bytes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b.as_u64().unwrap() as u8)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            String::from_utf8_lossy(&spelled).trim_end(),
            out.trim_end(),
            "{extra:?}: the steps spell stdout"
        );
        for s in steps {
            if !s["forced"].as_bool().unwrap() {
                assert!(s["token"]["logit"].is_number(), "{extra:?}: {s}");
                assert!(!s["top"].as_array().unwrap().is_empty(), "{extra:?}");
            }
        }
        if extra.contains(&"--greedy") && logits == "target" {
            assert_eq!(tokens(&t), tokens(&alone), "{extra:?}: the target's trace");
        }
    }
}

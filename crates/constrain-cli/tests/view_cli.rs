//! `constrain view TRACE.json -o page.html`, run as the built binary, and the
//! page's script run by headless Chromium when it is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("view_cli");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small trace as `constrain --trace` writes it: a sampled step with a
/// masked token above the chosen one, then a forced step.
fn trace() -> serde_json::Value {
    serde_json::json!({
        "model": "test.gguf",
        "prompt": "say <hi>",
        "settings": {"max_tokens": 8, "temperature": 1.0},
        "steps": [
            {"step": 0, "token": {"id": 5, "text": "{\"", "bytes": [123, 34], "logit": 2.0},
             "forced": false, "logprob": -0.3133, "allowed_count": 2, "allowed_mass": 0.7,
             "top": [
                {"id": 9, "text": "</script>", "logit": 3.0, "allowed": false},
                {"id": 5, "text": "{\"", "logit": 2.0, "allowed": true},
                {"id": 7, "text": " ", "logit": 1.0, "allowed": true}
             ]},
            {"step": 1, "token": {"id": 6, "text": "a", "bytes": [97], "logit": null},
             "forced": true, "logprob": 0.0, "allowed_count": 1, "allowed_mass": null, "top": []}
        ],
        "sequence_logprob": -0.3133
    })
}

fn view(input: &Path, output: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .arg("view")
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .expect("run constrain");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn write_page(name: &str) -> (PathBuf, String) {
    let d = dir();
    let input = d.join(format!("{name}.json"));
    std::fs::write(&input, serde_json::to_string_pretty(&trace()).unwrap()).unwrap();
    let output = d.join(format!("{name}.html"));
    let (code, out, err) = view(&input, &output);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty());
    (output.clone(), std::fs::read_to_string(&output).unwrap())
}

#[test]
fn view_writes_the_marked_up_page() {
    let (_, html) = write_page("basic");
    assert!(html.contains("data-step=\"0\"") && html.contains("data-step=\"1\""));
    assert_eq!(html.matches("data-token-id=\"").count(), 3);
    assert!(html.contains("data-token-id=\"9\" data-allowed=\"false\""));
    assert!(html.contains("data-token-id=\"5\" data-allowed=\"true\""));
    let chosen = html.find("data-chosen=").unwrap();
    let bar = html[..chosen].rfind("data-token-id=").unwrap();
    assert!(html[bar..].starts_with("data-token-id=\"5\""));
    assert!(
        html.contains("data-control=\"temperature\"") && html.contains("data-control=\"top-p\"")
    );
    // Token text cannot close the script or inject markup.
    assert!(!html.contains("</script>\""));
    assert!(html.contains("&lt;/script&gt;"));
    assert!(html.contains("jump-forward"));
}

#[test]
fn bad_traces_exit_2_with_one_error_line() {
    let d = dir();
    let bad = d.join("bad.json");
    std::fs::write(&bad, "{\"model\": 1}").unwrap();
    for input in [bad, d.join("missing.json")] {
        let (code, out, err) = view(&input, &d.join("never.html"));
        assert_eq!(code, 2, "{err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: ") && err.contains(input.to_str().unwrap()),
            "{err}"
        );
    }
}

/// The script runs in a real browser: after load every bar's `data-prob` is
/// filled in, masked tokens get 0, and the allowed ones the softmax of their
/// logits at T = 1 (2 and 1: 0.731 and 0.269).
#[test]
fn chromium_runs_the_script() {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(chromium) = chromium else {
        eprintln!("skipping: chromium is not installed (/usr/bin/chromium); the page's script is untested here");
        return;
    };
    let (page, _) = write_page("chromium");
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prob = |id: u32| -> f64 {
        let at = dom.find(&format!("data-token-id=\"{id}\"")).unwrap();
        let rest = &dom[at..];
        let p = rest.find("data-prob=\"").unwrap() + "data-prob=\"".len();
        let end = rest[p..].find('"').unwrap();
        rest[p..p + end]
            .parse()
            .unwrap_or_else(|_| panic!("data-prob of {id} not filled: {}", &rest[..200]))
    };
    assert_eq!(prob(9), 0.0);
    assert!((prob(5) - 0.731059).abs() < 1e-5, "{}", prob(5));
    assert!((prob(7) - 0.268941).abs() < 1e-5, "{}", prob(7));
}

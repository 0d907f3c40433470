//! The playground page in a real headless browser (Chromium from Debian's
//! packages): `/?run` sends the example schema request, streams the answer
//! in, and the DOM that Chromium dumps must hold a JSON document valid for
//! the example schema, and the step inspector (the `constrain view`
//! component, drawn from the answer's `constrain_trace`) shows each step's
//! top 16 bars with the masked ones marked and every `data-prob` filled. Skips with a message when no Chromium is installed.

mod common;

use common::*;
use constrain_server::ServerConfig;
use std::process::Command;

fn browser() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        })
}

#[test]
fn the_playground_streams_a_valid_answer_in_a_headless_browser() {
    let Some(b) = browser() else {
        eprintln!("skipping: no chromium / google-chrome installed (apt-get install chromium)");
        return;
    };
    let addr = start(ServerConfig::default(), Fake::default());
    // `--dump-dom` fires when Chromium's virtual time budget runs out, which
    // on a loaded machine can come before the streamed answer's last event
    // has been handled: the page then has its answer but no finish line yet.
    // Load it again (at most five times) rather than read a half-run page.
    let mut attempt = 0;
    let (out, dom) = loop {
        attempt += 1;
        let profile = std::env::temp_dir().join(format!(
            "constrain-chromium-{}-{attempt}",
            std::process::id()
        ));
        let out = Command::new(b)
            .args([
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--virtual-time-budget=15000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--dump-dom")
            .arg(format!("http://{addr}/?run"))
            .output()
            .expect("run chromium");
        let _ = std::fs::remove_dir_all(&profile);
        let dom = String::from_utf8_lossy(&out.stdout).into_owned();
        if dom.contains("<pre id=\"meta\">finish_reason: ") || attempt == 5 || !out.status.success()
        {
            break (out, dom);
        }
        eprintln!("the page had not finished when Chromium dumped it (attempt {attempt}); loading it again");
    };
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer = dom
        .split("<pre id=\"answer\"")
        .nth(1)
        .and_then(|s| s.split_once('>'))
        .and_then(|(_, s)| s.split("</pre>").next())
        .expect("the answer box");
    let text = answer
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let doc: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{text:?} is not JSON ({e}); DOM: {dom}"));
    let schema = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
        "temperature": {"type": "number", "minimum": -60, "maximum": 60}}, "required": ["city", "unit", "temperature"], "additionalProperties": false});
    assert_valid(&schema, &doc);
    assert!(dom.contains("finish_reason: stop"), "{dom}");
    // The step inspector: the component `constrain view` pages show, drawn
    // from the answer's `constrain_trace` by the shared script.
    let insp = dom
        .split("<div id=\"inspector\">")
        .nth(1)
        .expect("the inspector box");
    assert!(insp.contains("class=\"ci-root\""), "{insp}");
    let steps = insp.matches("data-step=\"").count();
    assert!(steps >= 3, "{steps} steps: {insp}");
    let bars = insp.matches("data-token-id=\"").count();
    assert_eq!(
        bars,
        16 * steps,
        "16 bars a step (no forced step under a trace)"
    );
    assert_eq!(
        insp.matches("data-prob=\"\"").count(),
        0,
        "the script filled every data-prob"
    );
    assert!(insp.matches("data-chosen=").count() >= 1);
    assert!(
        insp.contains("data-allowed=\"false\"") && insp.contains("data-allowed=\"true\""),
        "random logits put masked tokens in the top 16"
    );
    assert!(
        insp.contains("data-control=\"temperature\"") && insp.contains("data-control=\"top-p\"")
    );
}

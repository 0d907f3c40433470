//! The real `openai` Python client against the server on loopback:
//! json_schema (and `parse()`), tools with each tool_choice, streaming with
//! usage, errors as the client's exceptions, 8 concurrent requests. The
//! client is installed from PyPI into a venv under the target directory on
//! first run; the test skips with a message when python3, venv or pip (or
//! the network) are unavailable.

mod common;

use common::*;
use constrain_server::ServerConfig;
use std::path::PathBuf;
use std::process::Command;

fn ok(cmd: &mut Command) -> bool {
    cmd.output().map(|o| o.status.success()).unwrap_or(false)
}

#[test]
fn the_openai_python_client_works_end_to_end() {
    if !ok(Command::new("python3").arg("--version")) {
        eprintln!("skipping: python3 is not installed");
        return;
    }
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("openai-venv");
    let py = venv.join("bin/python");
    if !py.exists() && !ok(Command::new("python3").args(["-m", "venv"]).arg(&venv)) {
        eprintln!("skipping: python3 -m venv failed (no venv module?)");
        return;
    }
    let has_client = |py: &PathBuf| ok(Command::new(py).args(["-c", "import openai, pydantic"]));
    if !has_client(&py) {
        let installed = ok(Command::new(&py).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "openai",
        ]));
        if !installed || !has_client(&py) {
            eprintln!("skipping: pip could not install the openai client (offline?)");
            return;
        }
    }
    let addr = start(ServerConfig::default().parallel(4), Fake::default());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openai_client.py");
    let out = Command::new(&py)
        .arg(script)
        .env("BASE_URL", format!("http://{addr}/v1"))
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the openai client checks failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

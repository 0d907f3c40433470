//! The bad-input corpus: every case of `tests/bad-input/cases.json` runs the
//! real binary and must fail cleanly: exit code 2, exactly one `error:` line
//! on stderr (containing the case's `expect` substring), nothing on stdout,
//! no panic, within a memory and time bound.
//!
//! Progress lines before the error (`loading model ...`) are allowed; the
//! `error:` line must be the last.
//!
//! A case is data: `{"name", "args", "expect", "requires"?, "known_bug"?}`.
//! `{dir}` in an argument is the corpus folder. `requires` names a flag of a
//! subcommand (`{"command": "compile", "flag": "--schema"}`, command `""` for
//! the main job); when `constrain [command] --help` does not list it yet, the
//! case is skipped with a message. `known_bug` marks a reported library bug:
//! the case is run and must still fail (so the marker is removed once fixed).
//!
//! Every case runs under `ulimit -v` (4 GiB) so a case that tries to allocate
//! by an untrusted size fails fast instead of exhausting the machine.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(serde::Deserialize, Debug)]
struct Case {
    name: String,
    args: Vec<String>,
    expect: String,
    #[serde(default)]
    requires: Option<Requires>,
    #[serde(default)]
    known_bug: Option<String>,
}

#[derive(serde::Deserialize, Debug)]
struct Requires {
    command: String,
    flag: String,
}

const MEMORY_LIMIT_KIB: u64 = 4 << 20;
const TIME_LIMIT: Duration = Duration::from_secs(60);

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bad-input")
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_constrain")
}

/// Output of the binary run under the memory limit: (exit code or `None` when
/// killed by a signal, stdout, stderr).
fn run(args: &[String]) -> (Option<i32>, String, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_LIMIT_KIB}; exec \"$0\" \"$@\""))
        .arg(bin())
        .args(args)
        .env("CONSTRAIN_HOME", corpus().join("no-home"))
        // No vocabulary cache files written into the source tree.
        .env("CONSTRAIN_NO_CACHE", "1")
        // Deterministic messages: candle appends a captured backtrace to its
        // errors when RUST_BACKTRACE is set.
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run sh");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn help_lists(command: &str, flag: &str) -> bool {
    let mut args: Vec<&str> = Vec::new();
    if !command.is_empty() {
        args.push(command);
    }
    args.push("--help");
    let out = Command::new(bin())
        .args(&args)
        .output()
        .expect("run --help");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '<')
        .any(|w| w == flag)
}

/// Why a case's result is not a clean bad-input failure, if it is not.
fn judge(case: &Case, code: Option<i32>, out: &str, err: &str, took: Duration) -> Option<String> {
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    if err.contains("panicked") || err.contains("RUST_BACKTRACE") {
        return Some(format!("panicked: {err}"));
    }
    if code != Some(2) {
        return Some(format!("exit {code:?} (expected 2); stderr: {err}"));
    }
    if !out.is_empty() {
        return Some(format!("stdout is not empty: {out:?}"));
    }
    if errors.len() != 1 {
        return Some(format!("expected exactly one `error:` line, got: {err:?}"));
    }
    if err.lines().last() != Some(errors[0]) {
        return Some(format!(
            "the `error:` line is not the last line of stderr: {err:?}"
        ));
    }
    if !errors[0]
        .to_lowercase()
        .contains(&case.expect.to_lowercase())
    {
        return Some(format!("error line lacks {:?}: {}", case.expect, errors[0]));
    }
    if took > TIME_LIMIT {
        return Some(format!("took {took:?}"));
    }
    None
}

#[test]
fn bad_input_corpus_fails_cleanly() {
    let text = std::fs::read_to_string(corpus().join("cases.json")).expect("cases.json");
    let cases: Vec<Case> = serde_json::from_str(&text).expect("cases.json parses");
    assert!(cases.len() >= 30, "the corpus holds at least 30 cases");
    let dir = corpus().display().to_string();
    let mut failures = Vec::new();
    let (mut passed, mut skipped, mut known) = (0, 0, 0);
    let mut seen = std::collections::HashSet::new();
    for case in &cases {
        assert!(seen.insert(&case.name), "duplicate case name {}", case.name);
        if let Some(r) = &case.requires {
            if !help_lists(&r.command, &r.flag) {
                eprintln!(
                    "skipping {}: `constrain {} --help` has no {} yet",
                    case.name, r.command, r.flag
                );
                skipped += 1;
                continue;
            }
        }
        let args: Vec<String> = case.args.iter().map(|a| a.replace("{dir}", &dir)).collect();
        let t = Instant::now();
        let (code, out, err) = run(&args);
        let verdict = judge(case, code, &out, &err, t.elapsed());
        match (&case.known_bug, verdict) {
            (None, None) => passed += 1,
            (None, Some(why)) => failures.push(format!("{}: {why}", case.name)),
            (Some(bug), Some(why)) => {
                eprintln!("known bug still present in {}: {bug} ({why})", case.name);
                known += 1;
            }
            (Some(_), None) => failures.push(format!(
                "{}: handled cleanly now; remove its known_bug marker",
                case.name
            )),
        }
    }
    eprintln!(
        "bad input: {passed} handled, {known} known bugs, {skipped} skipped (flag not wired yet), {} failed",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} bad-input cases not handled cleanly:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

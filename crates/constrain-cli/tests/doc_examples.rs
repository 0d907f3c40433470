//! Every example of README.md and docs/*.md, checked as written.
//!
//! Each fenced ```sh, ```python and ```rust block is taken from the
//! Markdown with the `<!-- check: MODE (reason) -->` comment on the line
//! before its fence, if any. The modes:
//!
//! - `run` (the default for `sh`): each command (continuation lines joined)
//!   runs from the repository root with this build's `constrain` first on
//!   `PATH`; it must exit 0, or the code its trailing `# exit N` comment
//!   names.
//! - `flags`: for blocks that need the model, a server, a GPU or a network:
//!   each `constrain ...` command runs with `--help` appended, so every flag
//!   and value before it is parsed (a wrong flag exits 2) without loading a
//!   model; the block as a whole must be valid shell (`bash -n`).
//! - `syntax`: valid shell (`bash -n`) or valid Python (`ast.parse`).
//! - `rust` blocks are doc tests: the file must be included by a
//!   `#[cfg(doctest)]` item of a crate (so `cargo test` compiles them).
//!
//! Any mode but `run` must give its reason in parentheses.

use constrain_testkit::assets::repo_root;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Block {
    file: String,
    line: usize,
    lang: String,
    mode: Option<String>,
    reason: Option<String>,
    text: String,
}

fn blocks(root: &Path) -> Vec<Block> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for f in files {
        let name = f.strip_prefix(root).unwrap().display().to_string();
        let src = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = src.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let Some(info) = lines[i].strip_prefix("```") else {
                i += 1;
                continue;
            };
            let start = i;
            let lang = info.split(',').next().unwrap_or("").trim().to_string();
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].starts_with("```") {
                body.push(lines[i]);
                i += 1;
            }
            i += 1;
            if !matches!(lang.as_str(), "sh" | "python" | "rust") {
                continue;
            }
            let (mut mode, mut reason) = (None, None);
            if let Some(c) = start
                .checked_sub(1)
                .and_then(|p| lines[p].trim().strip_prefix("<!-- check: "))
                .and_then(|c| c.strip_suffix("-->"))
            {
                let c = c.trim();
                let (m, r) = match c.split_once(' ') {
                    Some((m, r)) => (m, Some(r.trim())),
                    None => (c, None),
                };
                mode = Some(m.to_string());
                reason = r
                    .and_then(|r| r.strip_prefix('('))
                    .and_then(|r| r.strip_suffix(')'))
                    .map(str::to_string);
            }
            out.push(Block {
                file: name.clone(),
                line: start + 1,
                lang,
                mode,
                reason,
                text: body.join("\n"),
            });
        }
    }
    out
}

/// The block's commands: continuation lines joined, comments and blank
/// lines dropped, with the exit code a trailing `# exit N` names.
fn commands(text: &str) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(line);
        let full = std::mem::take(&mut cur);
        let (cmd, comment) = split_comment(&full);
        if cmd.trim().is_empty() {
            continue;
        }
        let code = comment
            .and_then(|c| c.trim().strip_prefix("exit "))
            .and_then(|c| c.split(|ch: char| !ch.is_ascii_digit()).next())
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        out.push((cmd.trim().to_string(), code));
    }
    out
}

/// A command line and its trailing comment (a `#` outside quotes, after a
/// space).
fn split_comment(line: &str) -> (&str, Option<&str>) {
    let (mut single, mut double) = (false, false);
    let b = line.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && (i == 0 || b[i - 1] == b' ') => {
                return (&line[..i], Some(&line[i + 1..]));
            }
            _ => {}
        }
    }
    (line, None)
}

fn bash(root: &Path, script: &str, extra: &[&str]) -> (i32, String) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_constrain"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(extra)
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .env("PATH", path)
        .output()
        .expect("bash runs");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn check(root: &Path, b: &Block, doctested: &str) -> Result<(), String> {
    let mode = b.mode.as_deref();
    if mode.is_some_and(|m| m != "run") && b.reason.is_none() {
        return Err(format!("mode {mode:?} without a (reason)"));
    }
    match (b.lang.as_str(), mode.unwrap_or("run")) {
        ("rust", _) => {
            let needle = format!("{}\")", b.file);
            if !doctested.contains(&needle) {
                return Err(format!("{} is not included as a doc test", b.file));
            }
        }
        ("python", "syntax") => {
            let out = Command::new("python3")
                .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write;
                    c.stdin.take().unwrap().write_all(b.text.as_bytes())?;
                    c.wait_with_output()
                });
            match out {
                Ok(o) if !o.status.success() => {
                    return Err(String::from_utf8_lossy(&o.stderr).into_owned())
                }
                Ok(_) => {}
                Err(e) => eprintln!("skipping the Python syntax check: no python3 ({e})"),
            }
        }
        ("sh", "syntax") => {
            let (code, out) = bash(root, &b.text, &["-n"]);
            if code != 0 {
                return Err(out);
            }
        }
        ("sh", "flags") => {
            let (code, out) = bash(root, &b.text, &["-n"]);
            if code != 0 {
                return Err(out);
            }
            for (cmd, _) in commands(&b.text) {
                if cmd.starts_with("constrain ") {
                    let (code, out) = bash(root, &format!("{cmd} --help"), &[]);
                    if code != 0 {
                        return Err(format!("`{cmd} --help` exited {code}: {out}"));
                    }
                }
            }
        }
        ("sh", "run") => {
            for (cmd, want) in commands(&b.text) {
                let (code, out) = bash(root, &cmd, &[]);
                if code != want {
                    return Err(format!("`{cmd}` exited {code}, not {want}: {out}"));
                }
            }
        }
        (lang, m) => return Err(format!("no check mode {m:?} for {lang}")),
    }
    Ok(())
}

#[test]
fn every_doc_example_runs_or_is_checked_as_written() {
    let root = repo_root();
    let mut doctested = String::new();
    for lib in ["crates/constrain-model/src/lib.rs", "src/lib.rs"] {
        doctested += &std::fs::read_to_string(root.join(lib)).unwrap();
    }
    let all = blocks(&root);
    assert!(all.len() > 20, "found only {} blocks", all.len());
    let mut failures = Vec::new();
    for b in &all {
        if let Err(e) = check(&root, b, &doctested) {
            failures.push(format!("{}:{} ({}): {e}", b.file, b.line, b.lang));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn commands_split_on_continuations_and_read_exit_comments() {
    let c = commands("constrain check --regex 'a#b' \\\n  --text x   # exit 1\n\n# note\n");
    assert_eq!(
        c,
        vec![("constrain check --regex 'a#b'    --text x".into(), 1)]
    );
}

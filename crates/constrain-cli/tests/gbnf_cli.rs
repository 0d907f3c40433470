//! GBNF through the real binary: `compile --grammar FILE.gbnf`, `check
//! --grammar FILE.gbnf --text ...` (exit 0 accepted, 1 rejected, 2 bad
//! input), texts that begin with `-`, and `.regex` files unchanged.

use constrain_testkit::assets as common;

use std::process::Command;

fn constrain(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn grammar(file: &str) -> String {
    format!("{}/grammars/{file}", common::repo_root().display())
}

fn check(file: &str, text: &str) -> i32 {
    let g = grammar(file);
    let (code, out, err) = constrain(&["check", "--grammar", &g, "--text", text]);
    assert!(
        code == 0 || code == 1,
        "{file} {text:?}: exit {code}: {out} {err}"
    );
    code
}

#[test]
fn check_gbnf_grammars() {
    if common::tokenizer_path().is_none() {
        return;
    }
    assert_eq!(check("arithmetic.gbnf", "1 + 2*(3 - 4)"), 0);
    assert_eq!(check("arithmetic.gbnf", "1 +"), 1);
    // Texts that begin with `-`, in both spellings.
    assert_eq!(check("arithmetic.gbnf", "-5"), 0);
    assert_eq!(check("arithmetic.gbnf", "--5"), 0);
    let g = grammar("arithmetic.gbnf");
    let (code, out, err) = constrain(&["check", "--grammar", &g, "--text=-5 * 2"]);
    assert_eq!(code, 0, "{out} {err}");
    let (code, out, _) = constrain(&["check", "--grammar", &g, "--text=-"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("rejected"), "{out}");
    assert_eq!(
        check(
            "json.gbnf",
            r#"{"a": [1, 2.5e3, "x\n", {"b": null}], "c": true}"#
        ),
        0
    );
    assert_eq!(check("json.gbnf", r#"{"a": [1, 2,]}"#), 1);
    assert_eq!(check("chess-san.gbnf", "Nbxd7+"), 0);
    assert_eq!(check("chess-san.gbnf", "exd8=Q#"), 0);
    assert_eq!(check("chess-san.gbnf", "e8"), 1);
    assert_eq!(check("comma-list.gbnf", "apples, \"pears\",plums"), 0);
    assert_eq!(check("comma-list.gbnf", "apples,"), 1);
    assert_eq!(
        check(
            "mini-lang.gbnf",
            "let x = 1\nwhile x < 10 {\n  x += 1\n}\nprint(x)\n"
        ),
        0
    );
    assert_eq!(check("mini-lang.gbnf", "let x = \n"), 1);
}

#[test]
fn compile_gbnf_and_regex_files() {
    if common::tokenizer_path().is_none() {
        return;
    }
    let (code, out, err) = constrain(&["compile", "--grammar", &grammar("json.gbnf"), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["index_states"].as_u64().unwrap() > 10, "{out}");
    // GBNF recursion is exact (the pushdown engine): any depth is accepted,
    // an unbalanced text is not.
    let g = grammar("json.gbnf");
    let deep = format!("{}1{}", "[".repeat(50), "]".repeat(50));
    let (code, out, err) = constrain(&["check", "--grammar", &g, "--text", &deep]);
    assert_eq!(code, 0, "{out} {err}");
    let (code, _, _) = constrain(&["check", "--grammar", &g, "--text", &deep[1..]]);
    assert_eq!(code, 1, "one bracket short");
    // A regex grammar file works as before.
    let (code, _, err) = constrain(&[
        "check",
        "--grammar",
        &grammar("uuid.regex"),
        "--text",
        "123e4567-e89b-12d3-a456-426614174000",
    ]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn malformed_gbnf_is_one_error_line() {
    let dir = std::env::temp_dir().join(format!("constrain-gbnf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.gbnf");
    std::fs::write(&f, "root ::= \"a\" |\n  ( \"b\"\n").unwrap();
    let (code, out, err) = constrain(&["compile", "--grammar", f.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("error: grammar "), "{err}");
    assert!(lines[0].contains("line 3, column 1"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

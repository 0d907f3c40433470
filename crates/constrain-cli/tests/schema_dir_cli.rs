//! `--schema-dir`: every `*.json` in the folder is a document `$ref`s may
//! name, under its `$id` or, without one, its `file://` URI (so a relative
//! `$ref` from a schema beside it names it). Skips without the tokenizer.

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

#[test]
fn schema_dir_registers_documents_by_id_and_by_file() {
    if common::tokenizer_path().is_none() {
        eprintln!("skipped: the Qwen tokenizer is not cached (scripts/fetch-assets)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("constrain-schema-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // By `$id`.
    std::fs::write(
        dir.join("unit.json"),
        r#"{"$id": "https://example.com/unit.json", "enum": ["c", "f"]}"#,
    )
    .unwrap();
    // By file URI (no `$id`), named relatively by the main schema.
    std::fs::write(
        dir.join("temp.json"),
        r#"{"type": "integer", "minimum": -50, "maximum": 50}"#,
    )
    .unwrap();
    let main = dir.join("main.json");
    std::fs::write(
        &main,
        r#"{"type": "object",
            "properties": {"t": {"$ref": "temp.json"}, "u": {"$ref": "https://example.com/unit.json"}},
            "required": ["t", "u"], "additionalProperties": false}"#,
    )
    .unwrap();
    let (m, d) = (main.to_str().unwrap(), dir.to_str().unwrap());
    let check = |text: &str, with_dir: bool| {
        let mut args = vec!["check", "--schema", m, "--text", text];
        if with_dir {
            args.extend(["--schema-dir", d]);
        }
        constrain(&args)
    };
    let (code, out, err) = check(r#"{"t":-3,"u":"c"}"#, true);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = check(r#"{"t":51,"u":"c"}"#, true);
    assert_eq!(code, 1, "out of the registered bound: {out}");
    let (code, out, _) = check(r#"{"t":1,"u":"k"}"#, true);
    assert_eq!(code, 1, "not in the registered enum: {out}");
    // Without the folder the references name nothing: an error, no fetch.
    let (code, _, err) = check(r#"{"t":-3,"u":"c"}"#, false);
    assert!(code != 0 && err.contains("unresolvable $ref"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

//! Corpus-driven checks of the schema compiler.
//!
//! - `random_walks_on_maskbench_sample`: texts drawn at random from the DFA of
//!   a sample of MaskBench schemas must parse and validate (oracle:
//!   `jsonschema`). Skips when the corpus is absent.
//! - `maskbench_measure` (ignored; run with `--ignored --nocapture`): the
//!   MaskBench pass rate under `SchemaOptions::compliant()`, DFA sizes, and
//!   the count of invalid instances accepted (must be 0). `MB_STEP=n` samples
//!   every n-th file; `MB_FILTER=text` keeps matching file names.

mod schema_util;

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::schema::{self, SchemaOptions};
use schema_util::*;
use serde_json::Value;
use std::time::Instant;

fn files(step: usize, filter: &str) -> Vec<std::path::PathBuf> {
    let Some(dir) = corpus("maskbench-dev") else {
        return Vec::new();
    };
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(filter))
        .collect();
    v.sort();
    v.into_iter().step_by(step.max(1)).collect()
}

fn small_dfa_config() -> DfaConfig {
    DfaConfig::default()
        .determinize_size_limit(256 << 20)
        .dfa_size_limit(128 << 20)
}

#[test]
fn random_walks_on_maskbench_sample() {
    let files = files(37, "");
    if files.is_empty() {
        return;
    }
    let mut failures = Vec::new();
    let mut walked = 0;
    for path in &files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let schema_v = &doc["schema"];
        let Some(oracle) = Oracle::new(schema_v) else {
            continue;
        };
        let Ok(c) = schema::compile(schema_v, &SchemaOptions::compliant()) else {
            continue;
        };
        if c.regex.len() > 200_000 {
            continue;
        }
        let Ok(d) = ByteDfa::new(&c.regex, &small_dfa_config()) else {
            continue;
        };
        if d.state_count() > 20_000 {
            continue;
        }
        let w = Walker::new(&d);
        let mut r = rng(7);
        walked += 1;
        for _ in 0..20 {
            let Some(text) = w.walk(&mut r, 60) else {
                break;
            };
            let s = String::from_utf8(text).expect("DFA output is UTF-8");
            match serde_json::from_str::<Value>(&s) {
                Err(e) => failures.push(format!("{}: does not parse ({e}): {s}", path.display())),
                Ok(v) => {
                    if !oracle.valid(&v) {
                        failures.push(format!("{}: does not validate: {s}", path.display()));
                    }
                }
            }
        }
    }
    eprintln!("random walks over {walked} schemas");
    assert!(
        walked > 50 || files.len() < 100,
        "too few schemas walked: {walked}"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
#[ignore]
fn maskbench_measure() {
    let step: usize = std::env::var("MB_STEP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let filter = std::env::var("MB_FILTER").unwrap_or_default();
    let files = files(step, &filter);
    if files.is_empty() {
        return;
    }
    let mut opts = SchemaOptions::compliant();
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<usize>().ok());
    if let Some(v) = env("MB_EXTRA") {
        opts.extra_value_depth = v;
    }
    if let Some(v) = env("MB_FREE") {
        opts.free_form_depth = v;
    }
    if let Some(v) = env("MB_CAP") {
        opts.max_length_cap = Some(v as u64);
    }
    if let Some(v) = env("MB_ORDER_LEN") {
        opts.any_order_max_len = v;
    }
    if let Some(v) = env("MB_ORDER") {
        opts.any_order_max_properties = v;
    }
    let (mut total, mut compiled, mut dfa_ok, mut passing) = (0, 0, 0, 0);
    let (mut valid_n, mut valid_ok, mut invalid_n, mut invalid_acc) = (0, 0, 0, 0);
    let mut states: Vec<usize> = Vec::new();
    let mut errors: std::collections::BTreeMap<String, usize> = Default::default();
    let mut unsound = Vec::new();
    let mut compile_ms = Vec::new();
    for path in &files {
        total += 1;
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let t0 = Instant::now();
        let c = match schema::compile(&doc["schema"], &opts) {
            Ok(c) => c,
            Err(e) => {
                let msg = e.to_string();
                let key = msg
                    .split(" at ")
                    .next()
                    .unwrap_or(&msg)
                    .chars()
                    .take(70)
                    .collect::<String>();
                *errors.entry(key).or_default() += 1;
                if std::env::var("MB_VERBOSE").is_ok() {
                    eprintln!("{name}: {msg}");
                }
                continue;
            }
        };
        compiled += 1;
        let d = match ByteDfa::new(&c.regex, &small_dfa_config()) {
            Ok(d) => d,
            Err(e) => {
                *errors
                    .entry(format!(
                        "dfa: {}",
                        e.to_string().chars().take(50).collect::<String>()
                    ))
                    .or_default() += 1;
                continue;
            }
        };
        compile_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        dfa_ok += 1;
        states.push(d.state_count());
        if std::env::var("MB_LIST").is_ok() {
            eprintln!("STATES {} {} {}", d.state_count(), c.regex.len(), name);
        }
        let mut pass = true;
        for t in doc["tests"].as_array().unwrap() {
            let text = py_dumps(&t["data"]);
            let ok = d.matches(text.as_bytes());
            if t["valid"].as_bool().unwrap() {
                valid_n += 1;
                if ok {
                    valid_ok += 1;
                } else {
                    pass = false;
                    if std::env::var("MB_VERBOSE").is_ok() {
                        eprintln!(
                            "{name}: valid rejected: {}",
                            text.chars().take(300).collect::<String>()
                        );
                    }
                }
            } else {
                invalid_n += 1;
                if ok {
                    invalid_acc += 1;
                    pass = false;
                    unsound.push(format!(
                        "{name}: {}",
                        text.chars().take(300).collect::<String>()
                    ));
                }
            }
        }
        if pass {
            passing += 1;
        }
    }
    states.sort();
    compile_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |v: &Vec<usize>, p: f64| {
        v.get(((v.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    let pctf = |v: &Vec<f64>, p: f64| {
        v.get(((v.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    eprintln!(
        "files {total}, compiled {compiled}, dfa built {dfa_ok}, passing {passing} ({:.1} %)",
        100.0 * passing as f64 / total as f64
    );
    eprintln!("valid instances accepted {valid_ok}/{valid_n}; invalid instances accepted {invalid_acc}/{invalid_n}");
    eprintln!(
        "DFA states p50 {} p90 {} p99 {} max {}; compile+DFA ms p50 {:.1} p90 {:.1} p99 {:.1} max {:.1}",
        pct(&states, 0.5),
        pct(&states, 0.9),
        pct(&states, 0.99),
        states.last().copied().unwrap_or(0),
        pctf(&compile_ms, 0.5),
        pctf(&compile_ms, 0.9),
        pctf(&compile_ms, 0.99),
        compile_ms.last().copied().unwrap_or(0.0)
    );
    let mut errs: Vec<_> = errors.into_iter().collect();
    errs.sort_by(|a, b| b.1.cmp(&a.1));
    for (e, n) in errs.iter().take(40) {
        eprintln!("{n:5}  {e}");
    }
    for u in &unsound {
        eprintln!("UNSOUND {u}");
    }
}

/// DFA sizes of the building blocks (ignored; `--ignored --nocapture`).
#[test]
#[ignore]
fn building_block_sizes() {
    use constrain::schema::{JsonMode, Whitespace};
    let probe = std::env::var("MB_SCHEMA").ok();
    let schemas: Vec<(String, Value)> = match probe {
        Some(p) => vec![(
            p.clone(),
            serde_json::from_str(
                &std::fs::read_to_string(&p)
                    .map(|t| {
                        let v: Value = serde_json::from_str(&t).unwrap();
                        if v.get("schema").is_some() {
                            v["schema"].to_string()
                        } else {
                            t
                        }
                    })
                    .unwrap_or(p),
            )
            .unwrap(),
        )],
        None => vec![
            ("{}".into(), serde_json::json!({})),
            ("string".into(), serde_json::json!({"type": "string"})),
            (
                "string maxLength 64".into(),
                serde_json::json!({"type": "string", "maxLength": 64}),
            ),
            (
                "object a,b,c".into(),
                serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}}),
            ),
            (
                "object a..j".into(),
                serde_json::json!({"type": "object", "properties": {
                "a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}, "d": {"type": "number"}, "e": {"type": "string"},
                "f": {"type": "integer"}, "g": {"type": "string"}, "h": {"type": "boolean"}, "i": {"type": "number"}, "j": {"type": "string"}}}),
            ),
            (
                "date-time".into(),
                serde_json::json!({"type": "string", "format": "date-time"}),
            ),
            (
                "email".into(),
                serde_json::json!({"type": "string", "format": "email"}),
            ),
            (
                "uri".into(),
                serde_json::json!({"type": "string", "format": "uri"}),
            ),
        ],
    };
    for (name, s) in &schemas {
        for mode in [JsonMode::Strict, JsonMode::Compliant] {
            for ws in [
                Whitespace::Compact,
                Whitespace::Python,
                Whitespace::Flexible { max: 2 },
            ] {
                for depth in [1usize, 2, 3] {
                    let o = SchemaOptions::default()
                        .whitespace(ws)
                        .mode(mode)
                        .free_form_depth(depth)
                        .allow_unknown_keywords(true);
                    let c = match schema::compile(s, &o) {
                        Ok(c) => c,
                        Err(e) => {
                            eprintln!("{name}: {e}");
                            continue;
                        }
                    };
                    let t = Instant::now();
                    let d = ByteDfa::new(&c.regex, &small_dfa_config());
                    match d {
                        Ok(d) => eprintln!("{name:24} {mode:?} {ws:?} free-depth {depth}: regex {} B, {} states, {:.1} ms", c.regex.len(), d.state_count(), t.elapsed().as_secs_f64() * 1e3),
                        Err(e) => eprintln!("{name:24} {mode:?} {ws:?} free-depth {depth}: regex {} B, {e}", c.regex.len()),
                    }
                }
            }
        }
    }
}

/// Prints the regex of `MB_SCHEMA` (a JSON text) and checks `MB_TEXT` (ignored).
#[test]
#[ignore]
fn probe() {
    let Ok(s) = std::env::var("MB_SCHEMA") else {
        return;
    };
    let v: Value = serde_json::from_str(&s).unwrap();
    let c = schema::compile(&v, &SchemaOptions::compliant()).unwrap();
    eprintln!("{}", c.regex);
    if let Ok(t) = std::env::var("MB_TEXT") {
        let d = ByteDfa::new(&c.regex, &small_dfa_config()).unwrap();
        eprintln!("matches: {}", d.matches(t.as_bytes()));
    }
}

/// How deep can the generated regexes nest before the regex parser's nest
/// limit bites (ignored; prints figures).
#[test]
#[ignore]
fn nest_limit_probe() {
    for n in [20usize, 40, 60, 80, 120, 200] {
        let mut props = serde_json::Map::new();
        for i in 0..n {
            props.insert(format!("p{i}"), serde_json::json!({"type": "integer"}));
        }
        let s = serde_json::json!({"type": "object", "properties": props, "additionalProperties": false});
        let c = schema::compile(&s, &SchemaOptions::default()).unwrap();
        let d = ByteDfa::new(&c.regex, &small_dfa_config());
        eprintln!(
            "{n} optional properties: {}",
            match d {
                Ok(d) => format!("{} states", d.state_count()),
                Err(e) => e.to_string(),
            }
        );
    }
    let mut s = serde_json::json!({"type": "integer"});
    for depth in 1..200usize {
        s = serde_json::json!({"type": "object", "properties": {"a": s}, "required": ["a"]});
        if depth % 20 == 0 {
            let c = schema::compile(&s, &SchemaOptions::default()).unwrap();
            let d = ByteDfa::new(&c.regex, &small_dfa_config());
            eprintln!(
                "nesting {depth}: {}",
                match d {
                    Ok(d) => format!("{} states", d.state_count()),
                    Err(e) => e.to_string(),
                }
            );
        }
    }
}

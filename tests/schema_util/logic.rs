//! The oracle-checked harness of the boolean-algebra tests (moved from
//! `schema_logic.rs` so that other schema test files share it): listed
//! instances confirmed by the `jsonschema` oracle and matched against the DFA
//! under every whitespace policy and mode, then random walks and random
//! values checked for soundness.

use super::*;
use constrain::dfa::ByteDfa;
use constrain::schema::{self, JsonMode, Whitespace};
use rand::Rng;
use serde_json::{json, Map, Value};

pub const POLICIES: [Whitespace; 3] = [
    Whitespace::Compact,
    Whitespace::Python,
    Whitespace::Flexible { max: 2 },
];
pub const MODES: [JsonMode; 2] = [JsonMode::Strict, JsonMode::Compliant];

pub fn compile(schema: &Value, ws: Whitespace, mode: JsonMode) -> ByteDfa {
    let c = schema::compile(schema, &opts(ws, mode))
        .unwrap_or_else(|e| panic!("{schema} ({mode:?}, {ws:?}): {e}"));
    dfa(&c)
}

/// Listed instances (oracle-confirmed), then random soundness checks.
pub fn check(schema: Value, accept: &[Value], reject: &[Value]) {
    check_in(schema, accept, reject, &MODES)
}

pub fn check_in(schema: Value, accept: &[Value], reject: &[Value], modes: &[JsonMode]) {
    let oracle = Oracle::new(&schema).expect("oracle compiles the schema");
    for v in accept {
        assert!(
            oracle.valid(v),
            "test data: {v} should be valid for {schema}"
        );
    }
    for v in reject {
        assert!(
            !oracle.valid(v),
            "test data: {v} should be invalid for {schema}"
        );
    }
    for &mode in modes {
        for ws in POLICIES {
            let d = compile(&schema, ws, mode);
            for v in accept {
                let t = render(v, ws);
                assert!(
                    d.matches(t.as_bytes()),
                    "{mode:?} {ws:?}: {t} should match {schema}"
                );
            }
            for v in reject {
                let t = render(v, ws);
                assert!(
                    !d.matches(t.as_bytes()),
                    "{mode:?} {ws:?}: {t} should not match {schema}"
                );
            }
        }
        random_soundness(&schema, &oracle, mode);
    }
}

/// Names and constants appearing in the schema (keys and string values).
pub fn vocabulary(v: &Value, keys: &mut Vec<String>, atoms: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
                vocabulary(x, keys, atoms);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| vocabulary(x, keys, atoms)),
        Value::String(_) | Value::Number(_) | Value::Bool(_) => {
            if !atoms.contains(v) {
                atoms.push(v.clone());
            }
        }
        Value::Null => {}
    }
}

pub fn random_value(rng: &mut impl Rng, keys: &[String], atoms: &[Value], depth: u32) -> Value {
    let pick = rng.random_range(0..if depth == 0 { 6 } else { 8 });
    match pick {
        0 => Value::Null,
        1 => Value::Bool(rng.random_bool(0.5)),
        2 => json!(rng.random_range(-3i64..20)),
        3 => [json!(1.5), json!(-0.25), json!(2.0), json!("x"), json!("")][rng.random_range(0..5)]
            .clone(),
        4 | 5 => {
            if atoms.is_empty() {
                json!("a")
            } else {
                atoms[rng.random_range(0..atoms.len())].clone()
            }
        }
        6 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_value(rng, keys, atoms, depth - 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.random_range(0..4) {
                let k = if keys.is_empty() || rng.random_bool(0.15) {
                    "zz".to_string()
                } else {
                    keys[rng.random_range(0..keys.len())].clone()
                };
                m.insert(k, random_value(rng, keys, atoms, depth - 1));
            }
            Value::Object(m)
        }
    }
}

/// DFA walks validate; random values the DFA accepts validate; the random
/// values include both accepted and rejected ones.
pub fn random_soundness(schema: &Value, oracle: &Oracle, mode: JsonMode) {
    let d = compile(schema, Whitespace::Compact, mode);
    let w = Walker::new(&d);
    let mut r = rng(17);
    for _ in 0..200 {
        let Some(t) = w.walk(&mut r, 40) else {
            continue;
        };
        let text = String::from_utf8(t).expect("utf-8");
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!("{mode:?}: walk {text:?} does not parse ({e}) for {schema}")
        });
        assert!(
            oracle.valid(&v),
            "{mode:?}: walk {text} is invalid for {schema}"
        );
    }
    let (mut keys, mut atoms) = (Vec::new(), Vec::new());
    vocabulary(schema, &mut keys, &mut atoms);
    let (mut yes, mut no) = (0, 0);
    for _ in 0..3000 {
        let v = random_value(&mut r, &keys, &atoms, 3);
        let t = compact(&v);
        let valid = oracle.valid(&v);
        if d.matches(t.as_bytes()) {
            assert!(valid, "{mode:?}: accepted invalid {t} for {schema}");
            yes += 1;
        } else {
            no += 1;
        }
    }
    assert!(
        no > 0,
        "{mode:?}: every random value was accepted for {schema}"
    );
    let _ = yes;
}

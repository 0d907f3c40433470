//! Recursive `$ref` in a JSON Schema over the pushdown engine: a tree, a linked list through `$defs` and a recursive JSON
//! value compile to fragments, accept instances 50 levels deep and reject
//! invalid ones, as the `jsonschema` crate (the oracle) decides; random
//! token walks over a tiny and the Qwen vocabulary never reach a dead end
//! and end in valid documents; a `max_tokens` budget never cuts a
//! recursive structure; `max_stack_depth` is the stack limit, named in errors;
//! a schema without recursion keeps the flat path.

use constrain::schema::SchemaOptions;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use constrain_testkit::budget::{adversarial_run, bytes_and};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

/// ids 0..=255 are the single bytes, then a few multi-byte tokens that
/// cross value boundaries; EOS is the last id.
fn tiny_vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "[[",
        "]]",
        "]]]",
        "],",
        "},",
        "\"}",
        "\":",
        "{\"",
        "}]",
        "}]}",
        "[]",
        "{}",
        "null}",
        ",\"",
        "true]",
        "1,",
        "12",
        "\"next\":",
        "\"children\":[",
        "]}",
    ])
}

fn tree() -> Value {
    json!({
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["children"],
        "additionalProperties": false
    })
}

fn list() -> Value {
    json!({
        "$ref": "#/$defs/node",
        "$defs": {"node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}
            },
            "required": ["value", "next"],
            "additionalProperties": false
        }}
    })
}

fn json_value() -> Value {
    json!({
        "$ref": "#/$defs/v",
        "$defs": {"v": {"anyOf": [
            {"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
            {"type": "array", "items": {"$ref": "#/$defs/v"}},
            {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}}
        ]}}
    })
}

fn deep_tree(d: usize) -> String {
    if d <= 1 {
        r#"{"children":[]}"#.to_string()
    } else {
        format!(r#"{{"children":[{},{{"children":[]}}]}}"#, deep_tree(d - 1))
    }
}

fn deep_list(d: usize) -> String {
    let mut s = "null".to_string();
    for i in 0..d {
        s = format!(r#"{{"value":{i},"next":{s}}}"#);
    }
    s
}

fn deep_value(d: usize) -> String {
    let mut s = r#""leaf""#.to_string();
    for i in 0..d {
        s = if i % 2 == 0 {
            format!("[1,{s},true]")
        } else {
            format!(r#"{{"k":{s},"n":null}}"#)
        };
    }
    s
}

/// `depth` as both limits: the stack limit of the exact engine and the
/// unroll depth of the regular fallback (what `--max-depth` sets).
fn opts(depth: usize) -> SchemaOptions {
    SchemaOptions::default()
        .max_depth(depth)
        .max_stack_depth(depth)
}

fn compile(
    v: &Arc<Vocabulary>,
    schema: &Value,
    o: SchemaOptions,
) -> Result<Arc<Compiled>, CompileError> {
    compile_with(v, schema, o, CompilerConfig::default())
}

fn compile_with(
    v: &Arc<Vocabulary>,
    schema: &Value,
    o: SchemaOptions,
    config: CompilerConfig,
) -> Result<Arc<Compiled>, CompileError> {
    Compiler::new(v.clone(), config)
        .compile(&Source::json_schema(schema.clone()).with_schema_options(o))
}

/// The two ways a schema's called fragments are built: whole (the default
/// for these small ones), and every one determinized on demand (a lazy
/// threshold of one state makes every called fragment's text "long").
fn both_builds() -> [(&'static str, CompilerConfig); 2] {
    let mut lazy = CompilerConfig::default();
    lazy.dfa.lazy_states = Some(1);
    [("whole", CompilerConfig::default()), ("lazy callees", lazy)]
}

/// Compiles `schema` both ways; in the lazy one, checks that some called
/// fragment is lazy.
fn compile_both(
    v: &Arc<Vocabulary>,
    schema: &Value,
    o: SchemaOptions,
) -> Vec<(String, Arc<Compiled>)> {
    both_builds()
        .into_iter()
        .map(|(how, config)| {
            let lazy = config.dfa.lazy_states == Some(1);
            let c = compile_with(v, schema, o.clone(), config).unwrap();
            if lazy {
                assert!(
                    c.stats().lazy_fragments >= 2,
                    "{how}: {} of {} fragments lazy",
                    c.stats().lazy_fragments,
                    c.stats().fragments
                );
            }
            (how.to_string(), c)
        })
        .collect()
}

fn oracle(schema: &Value) -> jsonschema::Validator {
    jsonschema::validator_for(schema).unwrap()
}

fn valid(o: &jsonschema::Validator, text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| o.is_valid(&v))
}

fn cases() -> Vec<(&'static str, Value, fn(usize) -> String)> {
    vec![
        ("tree", tree(), deep_tree as fn(usize) -> String),
        ("list", list(), deep_list),
        ("value", json_value(), deep_value),
    ]
}

#[test]
fn fifty_deep_instances_are_accepted_as_the_oracle_decides() {
    let (v, _) = tiny_vocab();
    for (name, schema, deep) in cases() {
        for (how, c) in compile_both(&v, &schema, opts(64)) {
            let name = format!("{name} ({how})");
            assert!(c.stats().fragments >= 2, "{name}: not through fragments");
            let o = oracle(&schema);
            for d in [1, 2, 5, 20, 50] {
                let t = deep(d);
                assert!(valid(&o, &t), "{name} {d}: the oracle rejects the fixture");
                assert!(accepts(&c, &t), "{name}: depth {d} rejected: {t}");
            }
            // Every proper prefix of a valid text is not accepted, and broken
            // texts are rejected exactly when the oracle rejects them.
            let t = deep(50);
            let broken = [
                t[..t.len() - 1].to_string(),
                format!("{t}]"),
                t.replacen("null", "nul", 1),
                t.replacen("[]", "[[]]", 1),
                t.replacen(":", "::", 1),
                t.replacen("{", "{\"extra\":1,", 1),
                t.replacen("1", "\"1\"", 1),
            ];
            for b in broken {
                assert_eq!(accepts(&c, &b), valid(&o, &b), "{name}: {b}");
            }
        }
    }
}

#[test]
fn default_options_accept_a_depth_50_tree() {
    let (v, _) = tiny_vocab();
    let c = compile(&v, &tree(), SchemaOptions::default()).unwrap();
    assert!(accepts(&c, &deep_tree(50)));
    let l = compile(&v, &list(), SchemaOptions::default()).unwrap();
    assert!(accepts(&l, &deep_list(50)));
}

#[test]
fn max_stack_depth_is_the_stack_limit() {
    let (v, _) = tiny_vocab();
    let c = compile(&v, &tree(), opts(10)).unwrap();
    // The document is one frame; max_stack_depth nested recursive references.
    assert!(accepts(&c, &deep_tree(11)));
    assert!(!accepts(&c, &deep_tree(12)));
    let mut m = c.matcher();
    let t = deep_tree(12);
    for b in t.bytes() {
        if !m.accept_token(TokenId(b as u32)) {
            break;
        }
    }
    let e = c.index().lazy_limit_error().expect("the limit was hit");
    assert!(
        e.to_string().contains("SchemaOptions::max_stack_depth"),
        "{e}"
    );
}

#[test]
fn a_value_deeper_than_the_limit_is_a_named_error() {
    let (v, _) = tiny_vocab();
    // a -> b -> c -> a: the shortest value, `[null]`, nests the document,
    // a, b and c (three recursive references).
    let s = json!({
        "$ref": "#/$defs/a",
        "$defs": {
            "a": {"anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1, "maxItems": 1},
                {"$ref": "#/$defs/b"}
            ]},
            "b": {"type": "array", "items": {"$ref": "#/$defs/c"}, "minItems": 1, "maxItems": 1},
            "c": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}
        }
    });
    let e = compile(&v, &s, opts(2)).unwrap_err();
    assert!(e.to_string().contains("max_stack_depth"), "{e}");
    let c = compile(&v, &s, opts(3)).unwrap();
    assert!(accepts(&c, "[null]"));
    assert!(!accepts(&c, "[[null]]"), "needs one frame more than 3");
    let c = compile(&v, &s, opts(4)).unwrap();
    assert!(accepts(&c, "[[null]]"));
}

#[test]
fn a_recursion_without_a_base_case_admits_no_value() {
    let (v, _) = tiny_vocab();
    let s = json!({
        "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1}},
        "$ref": "#/$defs/n"
    });
    let e = compile(&v, &s, opts(8)).unwrap_err();
    assert!(e.to_string().contains("admits no value"), "{e}");
}

#[test]
fn budget_never_cuts_a_recursive_structure() {
    let (v, eos) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(3);
    // A roomy stack, and stacks so shallow that the adversary reaches the
    // limit, where the budget must count the way out that still fits.
    // `roomy`: the short way out of `a` (`{"c":1}`) calls `c`, the long one
    // (`"longlonglonglong"`) calls nothing; at the limit only the long one
    // is left.
    let roomy = json!({
        "$defs": {
            "a": {"anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1, "maxItems": 1},
                {"type": "object", "properties": {"c": {"$ref": "#/$defs/c"}},
                 "required": ["c"], "additionalProperties": false},
                {"const": "longlonglonglong"}
            ]},
            "c": {"anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/c"}, "minItems": 1, "maxItems": 1},
                {"const": 1}
            ]}
        },
        "$ref": "#/$defs/a"
    });
    let mut all: Vec<(&str, Value)> = cases().into_iter().map(|(n, s, _)| (n, s)).collect();
    all.push(("roomy", roomy));
    for ((name, schema), depth) in all
        .into_iter()
        .flat_map(|c| [64, 1, 2, 4].map(|d| (c.clone(), d)))
    {
        for (how, c) in compile_both(&v, &schema, opts(depth)) {
            let o = oracle(&schema);
            let start_need = c.matcher().tokens_to_accept().unwrap() as usize;
            for max_tokens in start_need..start_need + 30 {
                for _ in 0..3 {
                    let out = adversarial_run(&c, eos, max_tokens, 0.7, &mut rng)
                        .unwrap_or_else(|e| panic!("{name} ({how}) at depth limit {depth}: {e}"));
                    let text = String::from_utf8(out).unwrap();
                    assert!(valid(&o, &text), "{name} ({how}): {text}");
                }
            }
        }
    }
}

#[test]
fn left_recursion_is_refused_by_name() {
    let (v, _) = tiny_vocab();
    let direct = json!({"anyOf": [{"$ref": "#"}, {"type": "null"}]});
    // In a called fragment: `b` calls itself before any text.
    let through = json!({
        "$ref": "#/$defs/b",
        "$defs": {"b": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "integer"}]}}
    });
    for s in [direct, through] {
        for (how, config) in both_builds() {
            match compile_with(&v, &s, opts(8), config) {
                Err(e) => assert!(e.to_string().contains("left recursion"), "{how}: {e}"),
                Ok(_) => panic!("{how}: {s} compiled"),
            }
        }
    }
}

#[test]
fn a_schema_without_recursion_keeps_the_flat_path() {
    let (v, _) = tiny_vocab();
    let s = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
                   "$defs": {"x": {"type": "array", "items": {"type": "integer"}}}});
    let c = compile(&v, &s, SchemaOptions::default()).unwrap();
    assert_eq!(c.stats().fragments, 0);
    let regex = constrain::schema::compile(&s, &SchemaOptions::default())
        .unwrap()
        .regex;
    // One flat text: the public one with the compact constructs (an
    // array's one-copy list) written out, so never longer.
    assert!(c.stats().regex_len > 0 && c.stats().regex_len <= regex.len());
    assert!(!regex.contains("(?*") && !regex.contains("(?&"), "{regex}");
}

/// Random token walks: every allowed token keeps a completion (the walk
/// then finishes by the shortest path), and the text the walk ends with is
/// valid per the oracle.
fn walks(v: &Arc<Vocabulary>, seed: u64, n: usize, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    for (name, schema, _) in cases() {
        for (how, c) in compile_both(v, &schema, opts(64)) {
            let name = format!("{name} ({how})");
            let o = oracle(&schema);
            for _ in 0..n {
                let mut m = c.matcher();
                let mut out = Vec::new();
                for _ in 0..steps {
                    let allowed: Vec<TokenId> = m
                        .allowed()
                        .iter()
                        .filter(|t| v.token_bytes(*t).is_some())
                        .collect();
                    if allowed.is_empty() {
                        break;
                    }
                    // Adversarial: prefer tokens that open a structure.
                    let open: Vec<TokenId> = allowed
                        .iter()
                        .copied()
                        .filter(|&t| v.token_bytes(t).unwrap().iter().any(|b| b"[{".contains(b)))
                        .collect();
                    let pool = if !open.is_empty() && rng.random_bool(0.6) {
                        &open
                    } else {
                        &allowed
                    };
                    let t = pool[rng.random_range(0..pool.len())];
                    assert!(m.accept_token(t));
                    out.extend_from_slice(v.token_bytes(t).unwrap());
                }
                // Finish within the budget the matcher promises.
                let need = m.tokens_to_accept().expect("a completion is reachable") as usize;
                let mut left = need;
                while !m.is_accepting() {
                    let t = m
                        .allowed()
                        .iter()
                        .find(|&t| v.token_bytes(t).is_some() && m.fits(t, left))
                        .expect("a token fits the promised budget");
                    assert!(m.accept_token(t));
                    out.extend_from_slice(v.token_bytes(t).unwrap());
                    left -= 1;
                }
                let text = String::from_utf8(out).unwrap();
                assert!(valid(&o, &text), "{name}: walk ended invalid: {text}");
            }
        }
    }
}

#[test]
fn no_dead_ends_on_a_tiny_vocabulary() {
    let (v, _) = tiny_vocab();
    walks(&v, 5, 40, 80);
}

#[test]
fn no_dead_ends_over_the_qwen_vocabulary() {
    let Some(v) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: no tokenizer.json in ~/.cache/constrain (scripts/fetch-assets)");
        return;
    };
    walks(&v, 9, 8, 60);
}

/// A schema whose regex text runs past `max_regex_len` (free-form values
/// and a definition copied at each use) is written again with one shared
/// "any JSON value" fragment and its definitions as fragments: it compiles,
/// free-form values are exact at any depth, and the oracle agrees.
#[test]
fn past_the_regex_limit_free_form_values_and_definitions_are_shared_fragments() {
    use constrain::schema::regex::{compile_fragments, SchemaFragments, ANY_VALUE};
    let (v, _) = tiny_vocab();
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {},
            "b": {"$ref": "#/$defs/pt"},
            "c": {"type": "array", "items": {"$ref": "#/$defs/pt"}}
        },
        "required": ["a", "b"],
        "additionalProperties": false,
        "$defs": {"pt": {"type": "object",
                         "properties": {"x": {"type": "integer"}, "tag": true},
                         "required": ["x"], "additionalProperties": false}}
    });
    // Free-form values as copies (with `free_form_calls` the text of this
    // schema fits: see tests/schema_free_form.rs), so that the limit is hit.
    let small = SchemaOptions::compliant()
        .max_regex_len(3000)
        .free_form_calls(false)
        .deep_free_form(false);
    // The plain text is over the limit; the fragments are not.
    assert!(constrain::schema::compile(&schema, &small).is_err());
    let f = compile_fragments(&schema, &small).unwrap();
    let SchemaFragments::Fragments { names, .. } = &f else {
        panic!("expected fragments");
    };
    assert!(names.iter().any(|n| n == ANY_VALUE), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with("/$defs/pt")), "{names:?}");
    let shown = f.display();
    assert!(shown.contains("(?call:(any JSON value))"), "{shown}");
    assert!(!shown.contains("\\xF8"), "{shown}");

    let c = compile(&v, &schema, small).unwrap();
    assert!(c.stats().fragments >= 3);
    let o = oracle(&schema);
    let deep = format!("{}1{}", "[".repeat(50), "]".repeat(50));
    let deep_obj = format!("{}null{}", "{\"k\":".repeat(30), "}".repeat(30));
    let cases = [
        format!("{{\"a\":{deep},\"b\":{{\"x\":1}}}}"),
        format!("{{\"a\":{deep_obj},\"b\":{{\"x\":1,\"tag\":{deep}}},\"c\":[{{\"x\":2}}]}}"),
        "{\"a\":\"s\",\"b\":{\"x\":1.5}}".to_string(),
        "{\"a\":1,\"b\":{\"tag\":1}}".to_string(),
        "{\"a\":[1,],\"b\":{\"x\":1}}".to_string(),
        format!("{{\"a\":{},\"b\":{{\"x\":1}}}}", &deep[1..]),
    ];
    for text in cases {
        assert_eq!(
            accepts(&c, &text),
            valid(&o, &text),
            "{text}: the matcher and jsonschema disagree"
        );
    }
}

/// A document that calls more definitions than the lazy document's
/// one-byte markers can name (eleven) is determinized on demand as a long
/// called fragment is (three-byte markers, distances per room), not built
/// whole; it accepts and rejects as the oracle decides, and budgeted
/// adversarial runs end in valid documents.
#[test]
fn a_document_with_many_callees_is_determinized_on_demand() {
    let (v, eos) = tiny_vocab();
    let n = 14;
    let mut defs = serde_json::Map::new();
    let mut props = serde_json::Map::new();
    for i in 0..n {
        defs.insert(
            format!("d{i}"),
            json!({"type": "object",
                   "properties": {format!("k{i}"): {"$ref": format!("#/$defs/d{}", (i + 1) % n)},
                                  "v": {"enum": [i, "x"]}},
                   "additionalProperties": false}),
        );
        props.insert(format!("a{i}"), json!({"$ref": format!("#/$defs/d{i}")}));
        // (Text of the document's own, so that it is long.)
        props.insert(
            format!("s{i}"),
            json!({"enum": ["alpha", "beta", "gamma", "delta"]}),
        );
    }
    let schema = json!({"$defs": defs, "type": "object", "properties": props,
                        "additionalProperties": false});
    // (Properties in the declared order, the default.)
    let c = compile(&v, &schema, opts(16)).unwrap();
    assert!(c.stats().fragments > n, "{} fragments", c.stats().fragments);
    // (The definitions' texts are short: built whole.)
    assert!(
        c.stats().lazy_fragments >= 1,
        "the document is built whole ({} of {} fragments lazy)",
        c.stats().lazy_fragments,
        c.stats().fragments
    );
    let o = oracle(&schema);
    let good = [
        r#"{}"#,
        r#"{"a0":{}}"#,
        r#"{"a3":{"k3":{"k4":{"v":"x"}},"v":3},"a13":{}}"#,
        r#"{"a12":{"k12":{"k13":{"k0":{}}}}}"#,
        r#"{"a1":{"k1":{"v":2}},"s1":"delta"}"#,
    ];
    let bad = [
        r#"{"a14":{}}"#,
        r#"{"a3":{"v":4}}"#,
        r#"{"a3":{"k4":{}}}"#,
        r#"{"a12":{"k12":{"k13":{"k0":[]}}}}"#,
        r#"{"a1":{"k1":{"v":1}}}"#,
        r#"{"a0":{}"#,
        r#"{"s1":"epsilon"}"#,
    ];
    for t in good {
        assert!(valid(&o, t), "fixture {t}");
        assert!(accepts(&c, t), "rejected: {t}");
    }
    for t in bad {
        assert!(!valid(&o, t), "fixture {t}");
        assert!(!accepts(&c, t), "accepted: {t}");
    }
    let mut rng = StdRng::seed_from_u64(11);
    let start_need = c.matcher().tokens_to_accept().unwrap() as usize;
    for max_tokens in [
        start_need,
        start_need + 5,
        start_need + 40,
        start_need + 200,
    ] {
        for _ in 0..5 {
            let out = adversarial_run(&c, eos, max_tokens, 0.7, &mut rng).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(valid(&o, &text), "{text}");
        }
    }
}

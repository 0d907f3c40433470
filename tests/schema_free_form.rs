//! Free-form values as one shared "any JSON value" fragment: with `SchemaOptions::free_form_calls` (off by default) and a vocabulary
//! with every single byte, `{}`, `true`, items without a schema and
//! compliant mode's implicit extra-key values are calls of the shared
//! fragment, exact at any depth up to the stack limit instead of
//! `free_form_depth` / `extra_value_depth` containers deep. Checked against
//! the `jsonschema` crate (the oracle) on deep instances, on the MaskBench
//! dev files whose valid instances were rejected for nesting too deep, and
//! under a tight `max_tokens` budget with adversarial choices. With
//! `SchemaOptions::deep_free_form` (compliant mode's default) the same
//! calls are taken only by schemas with an explicit free-form value, and
//! only where no object's members would lose their any order.

use constrain::schema::regex::{compile_fragments, SchemaFragments, ANY_VALUE};
use constrain::schema::SchemaOptions;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use constrain_testkit::budget::{adversarial_run, bytes_and};
use rand::{rngs::StdRng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

/// Single bytes, then tokens that cross value boundaries; EOS last.
fn tiny_vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "[[", "]]", "]]]", "],", "},", "\"}", "\":", "{\"", "}]", "}]}", "[]", "{}", "null}",
        ",\"", "true]", "1,", "12", "]}", ": ", ", ", "\": [", "}, {",
    ])
}

/// `o` with free-form values as calls.
fn calls(o: SchemaOptions) -> SchemaOptions {
    o.free_form_calls(true)
}

fn compile(v: &Arc<Vocabulary>, schema: &Value, o: SchemaOptions) -> Arc<Compiled> {
    let o = calls(o);
    Compiler::new(v.clone(), CompilerConfig::default())
        .compile(&Source::json_schema(schema.clone()).with_schema_options(o))
        .unwrap()
}

fn valid(o: &jsonschema::Validator, text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| o.is_valid(&v))
}

fn nested(d: usize) -> String {
    let mut s = "1".to_string();
    for i in 0..d {
        s = if i % 2 == 0 {
            format!("[{s}, {{}}]")
        } else {
            format!("{{\"k{i}\": {s}, \"s\": \"x\"}}")
        };
    }
    s
}

fn record() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array"}, "meta": {}},
        "required": ["name"]
    })
}

#[test]
fn free_form_values_are_calls_of_one_shared_fragment() {
    let f = compile_fragments(&record(), &calls(SchemaOptions::compliant())).unwrap();
    let SchemaFragments::Fragments { names, .. } = &f else {
        panic!("expected fragments");
    };
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[1], ANY_VALUE);
    // Off (the default, and compliant mode without `deep_free_form`):
    // the depth-bounded copies of the regular path.
    let off = SchemaOptions::compliant().deep_free_form(false);
    assert!(matches!(
        compile_fragments(&record(), &off).unwrap(),
        SchemaFragments::Regex(_)
    ));
    // A schema without free-form values keeps the regular path.
    let plain = json!({"type": "object", "properties": {"a": {"type": "integer"}},
                       "required": ["a"], "additionalProperties": false});
    assert!(matches!(
        compile_fragments(&plain, &calls(SchemaOptions::default())).unwrap(),
        SchemaFragments::Regex(_)
    ));
}

#[test]
fn deep_free_form_values_match_the_oracle() {
    let (v, _) = tiny_vocab();
    let schemas = [
        record(),
        json!({}),
        json!(true),
        json!({"type": "array", "items": true}),
        json!({"type": "object", "additionalProperties": true}),
    ];
    for schema in schemas {
        let o = jsonschema::validator_for(&schema).unwrap();
        for opts in [SchemaOptions::compliant(), SchemaOptions::default()] {
            let c = compile(&v, &schema, opts.clone());
            assert!(c.stats().fragments >= 1, "{schema}: fragments");
            let d40 = nested(40);
            let texts = [
                format!("{{\"name\": \"a\", \"links\": [{{\"href\": \"x\", \"rel\": [1, 2]}}]}}"),
                format!("{{\"name\": \"a\", \"params\": [42, 23], \"deep\": {d40}}}"),
                format!("{{\"name\": \"a\", \"meta\": {d40}, \"tags\": [{d40}]}}"),
                format!("[{d40}, {d40}]"),
                format!("{{\"x\": {d40}}}"),
                d40.clone(),
                // Invalid: unbalanced, a trailing comma, a wrong type.
                format!("{{\"name\": \"a\", \"meta\": {}}}", &d40[1..]),
                "{\"name\": \"a\", \"meta\": [1, ]}".to_string(),
                "{\"name\": 1, \"meta\": [[[[1]]]]}".to_string(),
                "{\"name\": \"a\", \"tags\": {\"k\": [[[1]]]}}".to_string(),
            ];
            for text in &texts {
                let strict = matches!(opts.mode, constrain::schema::JsonMode::Strict);
                let got = accepts(&c, text);
                let want = valid(&o, text);
                if strict && got != want {
                    // Strict generation narrows (no implicit extras): it may
                    // reject what the oracle allows, never the other way.
                    assert!(!got, "{schema}: strict accepted invalid {text}");
                    continue;
                }
                assert_eq!(got, want, "{schema} ({:?}): {text}", opts.mode);
            }
        }
    }
}

/// A MaskBench dev file whose valid instance nests an extra key's value
/// deeper than the copies allowed (`"links": [{...}]` was rejected at
/// `[{"`): every instance, valid or not, decided as MaskBench writes it
/// (Python's `json.dumps`) and as the oracle does.
#[test]
fn dev_files_with_deep_extra_values_match_the_oracle() {
    let Some(corpora) = constrain_testkit::assets::corpora() else {
        eprintln!("skipping: no MaskBench corpus in ../shared/corpora");
        return;
    };
    let (v, _) = tiny_vocab();
    for file in ["Github_easy---o13687.json"] {
        let path = corpora.join("maskbench-dev").join(file);
        let Ok(cases) = constrain_testkit::maskbench::load_file(&path) else {
            eprintln!("skipping {file}: cannot read {}", path.display());
            continue;
        };
        for case in cases {
            let o = jsonschema::validator_for(&case.schema).unwrap();
            let c = compile(&v, &case.schema, SchemaOptions::compliant());
            for inst in &case.instances {
                let text = constrain_testkit::maskbench::python_dumps(&inst.data);
                assert_eq!(accepts(&c, &text), o.is_valid(&inst.data), "{file}: {text}");
                assert!(!inst.valid || accepts(&c, &text), "{file}: valid {text}");
            }
        }
    }
}

/// Generation with a tight `max_tokens` under choices that open a container
/// whenever the budget allows: every run ends complete and valid, with the
/// stack limit far and near (the shared fragment's frames count).
#[test]
fn budget_with_any_value_frames_never_cuts_a_value() {
    let (v, eos) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(17);
    for schema in [
        record(),
        json!({"type": "array", "items": true, "minItems": 1}),
    ] {
        let o = jsonschema::validator_for(&schema).unwrap();
        for depth in [1024usize, 2, 4] {
            let opts = SchemaOptions::compliant().max_stack_depth(depth);
            let c = compile(&v, &schema, opts);
            let start = c.matcher().tokens_to_accept().unwrap() as usize;
            for max_tokens in start..start + 25 {
                for _ in 0..3 {
                    let out = adversarial_run(&c, eos, max_tokens, 0.7, &mut rng)
                        .unwrap_or_else(|e| panic!("{schema} (stack {depth}): {e}"));
                    let text = String::from_utf8(out).unwrap();
                    assert!(valid(&o, &text), "{schema}: {text}");
                }
            }
        }
    }
}

/// An object too large for the permutation regex: its members are a member
/// set, which the pushdown engine's fragments write in declared order.
fn wide_record() -> Value {
    let mut props: serde_json::Map<String, Value> = (0..8)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    props.insert("meta".into(), json!({}));
    json!({"type": "object", "properties": props, "required": ["p0"]})
}

/// `deep_free_form`: calls for schemas with an explicit free-form value,
/// copies for the others and where a member set would lose its any order;
/// what each path accepts checked against the oracle (any key order, deep
/// free-form values where calls are taken).
#[test]
fn deep_free_form_takes_calls_only_where_nothing_narrows() {
    let deep = SchemaOptions::compliant();
    assert!(deep.deep_free_form && !deep.free_form_calls);
    let SchemaFragments::Fragments { names, .. } = compile_fragments(&record(), &deep).unwrap()
    else {
        panic!("an explicit free-form value: calls");
    };
    assert!(names.iter().any(|n| n == ANY_VALUE), "{names:?}");
    // Only implicit extra-key values: the copies (the regular path).
    let implicit = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    assert!(matches!(
        compile_fragments(&implicit, &deep).unwrap(),
        SchemaFragments::Regex(_)
    ));
    // A member set: the copies, so the members keep any order.
    assert!(matches!(
        compile_fragments(&wide_record(), &deep).unwrap(),
        SchemaFragments::Regex(_)
    ));
    let (v, _) = tiny_vocab();
    let build = |schema: &Value| {
        Compiler::new(v.clone(), CompilerConfig::default())
            .compile(&Source::json_schema(schema.clone()).with_schema_options(deep.clone()))
            .unwrap()
    };
    let d8 = nested(8);
    let cases = [
        (
            record(),
            vec![
                format!("{{\"name\": \"a\", \"meta\": {d8}}}"),
                format!("{{\"meta\": [{d8}], \"name\": \"a\", \"x\": 1}}"),
                format!("{{\"meta\": {}}}", &d8[1..]),
                format!("{{\"name\": 2, \"meta\": {d8}}}"),
            ],
        ),
        (
            wide_record(),
            vec![
                "{\"p7\": \"a\", \"p0\": \"b\", \"meta\": [[1]]}".to_string(),
                "{\"p3\": \"a\", \"meta\": {}}".to_string(),
                "{\"p1\": \"a\", \"p0\": \"b\", \"p1\": 3}".to_string(),
                "{\"p1\": \"a\"}".to_string(),
                "{\"p0\": 1}".to_string(),
            ],
        ),
    ];
    for (schema, texts) in cases {
        let o = jsonschema::validator_for(&schema).unwrap();
        let c = build(&schema);
        for text in &texts {
            assert_eq!(accepts(&c, text), valid(&o, text), "{schema}: {text}");
        }
    }
}

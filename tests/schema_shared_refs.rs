//! `SchemaOptions::shared_refs_len`: a schema whose regex text runs past it
//! is written with its definitions as shared pushdown fragments (each
//! generated and determinized once, not copied at each use), the language
//! unchanged (checked against the `jsonschema` crate); and when a shared
//! fragment's whole DFA runs past a DFA limit, the compiler goes back to the
//! one lazy DFA it built before the threshold existed.

use constrain::dfa::DfaConfig;
use constrain::schema::regex::{compile_fragments, SchemaFragments};
use constrain::schema::SchemaOptions;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use serde_json::{json, Value};
use std::sync::Arc;

/// Every single byte (the pushdown engine needs them) and a few longer
/// tokens, EOS last.
fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<(TokenId, Vec<u8>)> =
        (0..=255u8).map(|b| (TokenId(b as u32), vec![b])).collect();
    for t in ["{\"", "\":", ",\"", "}", "},", "[{", "}]", "12", "true"] {
        toks.push((TokenId(toks.len() as u32), t.as_bytes().to_vec()));
    }
    let eos = TokenId(toks.len() as u32);
    Arc::new(Vocabulary::new(toks, [eos], eos.0 as usize + 1).unwrap())
}

/// One definition used at five places.
fn schema() -> Value {
    let use_pt = json!({"$ref": "#/$defs/pt"});
    json!({
        "type": "object",
        "properties": {
            "a": use_pt, "b": use_pt, "c": use_pt,
            "d": {"type": "array", "items": use_pt, "maxItems": 3},
            "e": {"anyOf": [use_pt, {"type": "null"}]}
        },
        "required": ["a", "b"],
        "additionalProperties": false,
        "$defs": {"pt": {
            "type": "object",
            "properties": {
                "x": {"type": "integer", "minimum": -5, "maximum": 500},
                "name": {"type": "string", "maxLength": 6},
                "on": {"type": "boolean"}
            },
            "required": ["x"],
            "additionalProperties": false
        }}
    })
}

fn opts(shared_refs_len: usize) -> SchemaOptions {
    SchemaOptions::default().shared_refs_len(shared_refs_len)
}

fn compile(schema: &Value, o: SchemaOptions, dfa: DfaConfig) -> Arc<Compiled> {
    let config = CompilerConfig::default().dfa(dfa);
    Compiler::new(vocab(), config)
        .compile(&Source::json_schema(schema.clone()).with_schema_options(o))
        .unwrap()
}

fn cases() -> Vec<&'static str> {
    vec![
        r#"{"a":{"x":1},"b":{"x":500}}"#,
        r#"{"a":{"x":-5,"name":"abc","on":true},"b":{"x":0},"d":[{"x":2},{"x":3}],"e":null}"#,
        r#"{"a":{"x":1},"b":{"x":2},"c":{"x":3},"d":[],"e":{"x":4,"on":false}}"#,
        r#"{"a":{"x":1},"b":{"x":501}}"#,
        r#"{"a":{"x":1},"b":{"x":1},"d":[{"x":1},{"x":1},{"x":1},{"x":1}]}"#,
        r#"{"a":{"x":1,"name":"toolong!"},"b":{"x":1}}"#,
        r#"{"a":{"x":1}}"#,
        r#"{"a":{"on":true},"b":{"x":1}}"#,
        r#"{"a":{"x":1},"b":{"x":1},"e":{"x":1,"y":2}}"#,
        r#"{"a":{"x":1.5},"b":{"x":1}}"#,
    ]
}

#[test]
fn past_the_threshold_definitions_are_fragments_and_the_language_is_unchanged() {
    let schema = schema();
    let whole = opts(SchemaOptions::default().max_regex_len);
    let SchemaFragments::Regex(plain) = compile_fragments(&schema, &whole).unwrap() else {
        panic!("without the threshold the schema is one regex");
    };
    // Just under the text's length: still one regex; past it: fragments.
    assert!(matches!(
        compile_fragments(&schema, &opts(plain.regex.len())).unwrap(),
        SchemaFragments::Regex(_)
    ));
    let small = opts(plain.regex.len() / 2);
    let f = compile_fragments(&schema, &small).unwrap();
    let SchemaFragments::Fragments { names, .. } = &f else {
        panic!("past shared_refs_len the definitions are fragments");
    };
    assert!(names.iter().any(|n| n.ends_with("/$defs/pt")), "{names:?}");

    let shared = compile(&schema, small, DfaConfig::default());
    assert!(shared.stats().fragments >= 2);
    let regular = compile(&schema, whole, DfaConfig::default());
    assert_eq!(regular.stats().fragments, 0);
    let o = jsonschema::validator_for(&schema).unwrap();
    let mut seen = [0; 2];
    for text in cases() {
        let v: Value = serde_json::from_str(text).unwrap();
        let valid = o.is_valid(&v);
        seen[valid as usize] += 1;
        assert_eq!(accepts(&shared, text), valid, "shared: {text}");
        assert_eq!(accepts(&regular, text), valid, "regular: {text}");
    }
    assert!(seen[0] >= 4 && seen[1] >= 3, "fixtures: {seen:?}");
}

#[test]
fn a_shared_fragment_past_a_dfa_limit_falls_back_to_the_lazy_dfa() {
    let schema = schema();
    let plain = compile_fragments(&schema, &opts(usize::MAX)).unwrap();
    let SchemaFragments::Regex(plain) = plain else {
        panic!("one regex");
    };
    let small = opts(plain.regex.len() / 2);
    // Lazy from the first state: the regular path determinizes nothing up
    // front, while a fragment is determinized whole and passes the limit.
    let tight = DfaConfig::default()
        .dfa_size_limit(4 << 10)
        .lazy_states(Some(1));
    let config = CompilerConfig::default().dfa(tight.clone());
    let source = Source::json_schema(schema.clone())
        .with_schema_options(SchemaOptions::default().shared_refs_len(usize::MAX));
    // The threshold off: the lazy DFA compiles (its states past the limit
    // get no masks as matchers reach them: `LazyDfa`).
    let off = Compiler::new(vocab(), config).compile(&source).unwrap();
    let c = compile(&schema, small.clone(), tight);
    assert_eq!(c.stats().fragments, 0, "fell back to one DFA");
    for text in cases() {
        assert_eq!(accepts(&c, text), accepts(&off, text), "{text}");
    }
    // With room for the fragments, the threshold applies.
    assert!(
        compile(&schema, small, DfaConfig::default())
            .stats()
            .fragments
            >= 2
    );
}

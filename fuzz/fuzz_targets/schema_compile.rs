//! `schema_compile`: arbitrary JSON, biased towards JSON Schema keywords and
//! values, as a schema.
//!
//! Invariants (in `constrain_testkit::check::check_schema_both_ways`:
//! `check_schema_case` and `check_compiled_schema_case`, replayed by
//! `tests/fuzz_regressions.rs`):
//! compiling never panics and either refuses with a message or yields a regex
//! that parses; every random walk over the guide (masks checked against the
//! DFA oracle) ends in a text that parses as JSON and validates against the
//! schema with the `jsonschema` crate. The same schema compiled by a
//! `Compiler` (pushdown engine, run-time `uniqueItems` check) never offers an
//! empty mask or EOS before a valid text, and its walks finish under the
//! budget `tokens_to_accept` names.
//!
//! Bounds: JSON depth 5, at most 5 members per object or array, small DFA and
//! index limits, 3 walks of at most 48 chosen steps. On a violation the panic
//! message carries the schema as JSON: save `{"schema": ..., "choices": [...]}`
//! under `fuzz/regressions/schema_compile/NAME.json`.
#![no_main]

use arbitrary::Arbitrary;
use constrain_testkit::check::{check_schema_both_ways, json_test_vocabulary};
use constrain::dfa::DfaConfig;
use constrain::schema::SchemaOptions;
use constrain::vocab::Vocabulary;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Key {
    Type,
    Properties,
    Required,
    Items,
    PrefixItems,
    Enum,
    Const,
    MinLength,
    MaxLength,
    Minimum,
    Maximum,
    ExclusiveMinimum,
    ExclusiveMaximum,
    MultipleOf,
    Pattern,
    Format,
    AnyOf,
    OneOf,
    AllOf,
    Not,
    Ref,
    Defs,
    AdditionalProperties,
    MinItems,
    MaxItems,
    UniqueItems,
    MinProperties,
    MaxProperties,
    PatternProperties,
    If,
    Then,
    Else,
    Contains,
    MinContains,
    MaxContains,
    DependentRequired,
    DependentSchemas,
    Dependencies,
    PropertyNames,
    Description,
    UnevaluatedProperties,
    UnevaluatedItems,
    Anchor,
    DynamicAnchor,
    DynamicRef,
    A,
    B,
}

impl Key {
    fn name(self) -> &'static str {
        match self {
            Key::Type => "type",
            Key::Properties => "properties",
            Key::Required => "required",
            Key::Items => "items",
            Key::PrefixItems => "prefixItems",
            Key::Enum => "enum",
            Key::Const => "const",
            Key::MinLength => "minLength",
            Key::MaxLength => "maxLength",
            Key::Minimum => "minimum",
            Key::Maximum => "maximum",
            Key::ExclusiveMinimum => "exclusiveMinimum",
            Key::ExclusiveMaximum => "exclusiveMaximum",
            Key::MultipleOf => "multipleOf",
            Key::Pattern => "pattern",
            Key::Format => "format",
            Key::AnyOf => "anyOf",
            Key::OneOf => "oneOf",
            Key::AllOf => "allOf",
            Key::Not => "not",
            Key::Ref => "$ref",
            Key::Defs => "$defs",
            Key::AdditionalProperties => "additionalProperties",
            Key::MinItems => "minItems",
            Key::MaxItems => "maxItems",
            Key::UniqueItems => "uniqueItems",
            Key::MinProperties => "minProperties",
            Key::MaxProperties => "maxProperties",
            Key::PatternProperties => "patternProperties",
            Key::If => "if",
            Key::Then => "then",
            Key::Else => "else",
            Key::Contains => "contains",
            Key::MinContains => "minContains",
            Key::MaxContains => "maxContains",
            Key::DependentRequired => "dependentRequired",
            Key::DependentSchemas => "dependentSchemas",
            Key::Dependencies => "dependencies",
            Key::PropertyNames => "propertyNames",
            Key::Description => "description",
            Key::UnevaluatedProperties => "unevaluatedProperties",
            Key::UnevaluatedItems => "unevaluatedItems",
            Key::Anchor => "$anchor",
            Key::DynamicAnchor => "$dynamicAnchor",
            Key::DynamicRef => "$dynamicRef",
            Key::A => "a",
            Key::B => "b",
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Word {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    Null,
    A,
    B,
    Date,
    DateTime,
    Email,
    Uuid,
    RefA,
    RefRoot,
    RefAnchor,
    Pattern,
    Empty,
    Unicode,
}

impl Word {
    fn text(self) -> &'static str {
        match self {
            Word::Object => "object",
            Word::Array => "array",
            Word::String => "string",
            Word::Integer => "integer",
            Word::Number => "number",
            Word::Boolean => "boolean",
            Word::Null => "null",
            Word::A => "a",
            Word::B => "b",
            Word::Date => "date",
            Word::DateTime => "date-time",
            Word::Email => "email",
            Word::Uuid => "uuid",
            Word::RefA => "#/$defs/a",
            Word::RefRoot => "#",
            Word::RefAnchor => "#a",
            Word::Pattern => "^[a-c]{1,3}$",
            Word::Empty => "",
            Word::Unicode => "é\"\\\n",
        }
    }
}

#[derive(Arbitrary, Debug)]
enum J {
    Null,
    Bool(bool),
    Int(i16),
    Float(i16, u8),
    Str(Word),
    Arr(Vec<J>),
    Obj(Vec<(Key, J)>),
}

fn to_value(j: &J, depth: usize) -> Value {
    if depth > 5 {
        return json!({});
    }
    match j {
        J::Null => Value::Null,
        J::Bool(b) => json!(b),
        J::Int(i) => json!(i),
        J::Float(m, e) => json!(*m as f64 / 10f64.powi((*e % 4) as i32)),
        J::Str(w) => json!(w.text()),
        J::Arr(v) => Value::Array(v.iter().take(5).map(|x| to_value(x, depth + 1)).collect()),
        J::Obj(v) => {
            let mut m = Map::new();
            for (k, x) in v.iter().take(5) {
                m.insert(k.name().to_string(), to_value(x, depth + 1));
            }
            Value::Object(m)
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    schema: J,
    compliant: bool,
    choices: Vec<u8>,
}

/// Smaller than `fuzz_dfa_config`: building the DFA dominates the run time,
/// and a free-form value (`{}`) already needs a large one.
fn dfa_config() -> DfaConfig {
    DfaConfig::default().nfa_size_limit(256 << 10).determinize_size_limit(1 << 20).dfa_size_limit(512 << 10).minimize(false).lazy_states(None)
}

fn vocab() -> Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| Arc::new(json_test_vocabulary())).clone()
}

fuzz_target!(|input: Input| {
    let schema = to_value(&input.schema, 0);
    let opts = if input.compliant {
        SchemaOptions::compliant()
    } else {
        SchemaOptions::default()
    };
    // The validator must understand the schema; otherwise only "no panic" is checked.
    let validator = jsonschema::validator_for(&schema).ok();
    let validate = |v: &Value| validator.as_ref().is_none_or(|val| val.is_valid(v));
    let choices: Vec<u8> = input.choices.iter().take(96).copied().collect();
    let case = || json!({"schema": schema, "compliant": input.compliant, "choices": choices});
    if let Err(v) = check_schema_both_ways(&schema, &opts, vocab(), &dfa_config(), &choices, &validate) {
        panic!("{v}\ncase: {}", case());
    }
});

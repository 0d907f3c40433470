//! Regression tests for MaskBench dev classes that used to be refused:
//! fractional `multipleOf` read as decimals, and
//! `minProperties` / `maxProperties` beside extra keys. Each schema is
//! reduced from the named dev file.
//!
//! Counts are checked against the `jsonschema` oracle (listed instances,
//! random walks whose duplicate keys parse to fewer properties, random
//! values). Fractional `multipleOf` is checked against an exact decimal
//! oracle written here (`x / m` an integer over the rationals), since
//! validators that divide in floating point disagree with the decimal text
//! and with each other (see `Gen::decimal_multiple_of`).

mod schema_util;

use constrain::schema::{self, JsonMode, Whitespace};
use schema_util::logic::*;
use schema_util::*;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// Fractional multipleOf

/// Exact decimal reading of plain JSON number text: (negative, digits
/// without the point, fraction digits).
fn decimal(text: &str) -> Option<(bool, u128, u32)> {
    let (neg, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    if rest.contains(['e', 'E']) {
        return None;
    }
    let (i, f) = rest.split_once('.').unwrap_or((rest, ""));
    let digits: u128 = format!("{i}{f}").parse().ok()?;
    Some((neg, digits, f.len() as u32))
}

/// The oracle: `x / m` is an integer (exact rationals), `x` in `[lo, hi]`.
fn decimal_multiple(text: &str, m: &str, lo: Option<f64>, hi: Option<f64>) -> bool {
    let (neg, xd, xs) = decimal(text).expect("plain decimal");
    let (_, md, ms) = decimal(m).expect("plain decimal");
    // x / m = (xd / 10^xs) / (md / 10^ms) = xd·10^ms / (md·10^xs).
    let num = xd * 10u128.pow(ms);
    let den = md * 10u128.pow(xs);
    let v: f64 = text.parse().unwrap();
    let _ = neg;
    num % den == 0 && lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h)
}

/// Every listed text and 300 random walks agree with the decimal oracle,
/// under each mode.
fn check_multiple(schema: Value, m: &str, lo: Option<f64>, hi: Option<f64>, texts: &[&str]) {
    for mode in MODES {
        let d = compile(&schema, Whitespace::Compact, mode);
        for t in texts {
            let want = decimal_multiple(t, m, lo, hi);
            assert_eq!(
                d.matches(t.as_bytes()),
                want,
                "{mode:?}: {t} for {schema} (decimal oracle says {want})"
            );
        }
        let w = Walker::new(&d);
        let mut r = rng(5);
        let mut seen = 0;
        for _ in 0..300 {
            let Some(t) = w.walk(&mut r, 12) else {
                continue;
            };
            let t = String::from_utf8(t).unwrap();
            assert!(
                decimal_multiple(&t, m, lo, hi),
                "{mode:?}: walk {t} is not a multiple of {m} in range for {schema}"
            );
            seen += 1;
        }
        assert!(seen > 100, "few walks for {schema}");
    }
}

const NUMBERS: &[&str] = &[
    "0",
    "0.0",
    "1",
    "10",
    "10.0",
    "10.9",
    "10.99",
    "10.990",
    "10.991",
    "10.001",
    "0.07",
    "0.29",
    "2.01",
    "-0.01",
    "-500.25",
    "1230.55",
    "0.1",
    "0.25",
    "0.5",
    "0.75",
    "0.125",
    "2.5",
    "12.5",
    "7.5",
    "5",
    "99.99",
    "99.995",
    "99999999999.99",
    "100000000000.01",
    "3",
    "1.05",
];

/// `Github_easy---o17460` / `Snowplow---sp_35_Normalized`: money amounts,
/// `multipleOf: 0.01` (was "fractional multipleOf 0.01 (floating-point
/// semantics)").
#[test]
fn multiple_of_hundredths_is_decimal() {
    check_multiple(
        json!({"type": "number", "multipleOf": 0.01}),
        "0.01",
        None,
        None,
        NUMBERS,
    );
}

/// `Github_medium---o46411`: with the bounds the file states
/// (-99999999999.99 to 99999999999.99), through the product with the range.
#[test]
fn multiple_of_hundredths_within_bounds() {
    check_multiple(
        json!({"type": "number", "multipleOf": 0.01,
               "minimum": -99999999999.99, "maximum": 99999999999.99}),
        "0.01",
        Some(-99999999999.99),
        Some(99999999999.99),
        NUMBERS,
    );
    check_multiple(
        json!({"type": "number", "multipleOf": 0.01, "minimum": 0}),
        "0.01",
        Some(0.0),
        None,
        NUMBERS,
    );
}

/// `Github_medium---o74461`: skill values in quarters.
#[test]
fn multiple_of_quarters_and_other_divisors() {
    for m in ["0.25", "0.5", "2.5", "0.125", "0.05"] {
        let mv: f64 = m.parse().unwrap();
        check_multiple(
            json!({"type": "number", "multipleOf": mv}),
            m,
            None,
            None,
            NUMBERS,
        );
    }
    check_multiple(
        json!({"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 100}),
        "0.25",
        Some(0.0),
        Some(100.0),
        NUMBERS,
    );
}

/// An integer type with a fractional `multipleOf`: integers only (all of
/// them multiples of 0.5).
#[test]
fn multiple_of_half_on_integers() {
    let schema = json!({"type": "integer", "multipleOf": 0.5, "minimum": -3, "maximum": 40});
    for mode in MODES {
        let d = compile(&schema, Whitespace::Compact, mode);
        for t in ["0", "-3", "7", "40"] {
            assert!(d.matches(t.as_bytes()), "{t}");
        }
        for t in ["0.5", "41", "-4", "7.5"] {
            assert!(!d.matches(t.as_bytes()), "{t}");
        }
    }
}

/// Integer `multipleOf` (a divisor of a power of ten) and its complement
/// (`not`) with one bound, or with two bounds too far apart to list: by the
/// last digits within the bounds, exact against the `jsonschema` oracle, in
/// every mode. (A bound
/// used to make the product with the range fail on its regex length,
/// even for `{"minimum": 0, "multipleOf": 5}`.)
#[test]
fn integer_multiples_within_any_bounds() {
    let cases = [
        json!({"type": "integer", "minimum": 0, "multipleOf": 5}),
        json!({"type": "integer", "minimum": 1, "multipleOf": 10}),
        json!({"type": "integer", "maximum": 100, "multipleOf": 5}),
        json!({"type": "integer", "exclusiveMinimum": -1250, "multipleOf": 25}),
        json!({"type": "integer", "minimum": 0, "maximum": 1000000000, "multipleOf": 5}),
        json!({"type": "integer", "minimum": -77777, "maximum": 123456, "multipleOf": 4}),
        json!({"type": "integer", "minimum": 0, "not": {"multipleOf": 5}}),
        json!({"type": "integer", "minimum": -100, "maximum": 100000, "not": {"multipleOf": 4}}),
        json!({"type": "integer", "maximum": -3, "not": {"multipleOf": 2}}),
        json!({"type": "integer", "allOf": [{"not": {"multipleOf": 2}}, {"not": {"multipleOf": 5}}]}),
        json!({"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}},
               "patternProperties": {"^c": {"type": "integer", "multipleOf": 5}},
               "required": ["count"]}),
    ];
    let mut values: Vec<i64> = (-3000..3000).collect();
    values.extend((0..400).map(|i| 1_000_000_000 - 200 + i));
    values.extend((1..12).flat_map(|e| [10i64.pow(e), 10i64.pow(e) - 5, -(10i64.pow(e))]));
    values.extend([
        -77777,
        -77776,
        -77780,
        123456,
        123460,
        999999999999995,
        1000000000000000,
    ]);
    for schema in cases {
        let oracle = Oracle::new(&schema).expect("the oracle compiles it");
        for mode in MODES {
            let d = compile(&schema, Whitespace::Compact, mode);
            for &v in &values {
                let inst = if schema["type"] == "object" {
                    json!({"count": v})
                } else {
                    json!(v)
                };
                let text = compact(&inst);
                let want = oracle.valid(&inst) && v.abs() < 10i64.pow(15);
                assert_eq!(
                    d.matches(text.as_bytes()),
                    want,
                    "{mode:?}: {text} for {schema}"
                );
            }
        }
    }
}

/// A `multipleOf` whose digits are not a divisor of a power of ten fails
/// closed, naming the keyword and where.
#[test]
fn multiple_of_a_third_fails_closed() {
    let e = schema::compile(
        &json!({"properties": {"x": {"type": "number", "multipleOf": 0.3}}}),
        &opts(Whitespace::Compact, JsonMode::Strict),
    )
    .expect_err("0.3 is refused");
    let msg = e.to_string();
    assert!(
        msg.contains("multipleOf") && msg.contains("/properties/x"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------
// minProperties / maxProperties with extra keys

/// `Github_easy---o83411`: five declared string properties, three
/// required, `maxProperties: 5`, extra keys allowed in compliant mode (was
/// "maxProperties 5 with 5 possible declared properties and extra keys").
#[test]
fn max_properties_counts_extra_keys() {
    check_in(
        json!({"type": "object",
               "properties": {"identifier": {"type": "string"}, "version": {"type": "string"},
                              "output": {"type": "string"}, "mimeType": {"type": "string"},
                              "magicLocation": {"type": "string"}},
               "required": ["identifier", "version", "output"],
               "maxProperties": 5}),
        &[
            json!({"identifier": "a", "version": "1", "output": "t", "mimeType": "m",
                   "magicLocation": "/x"}),
            json!({"identifier": "a", "version": "1", "output": "t", "zz": 1}),
            json!({"identifier": "a", "version": "1", "output": "t", "mimeType": "m", "zz": 1}),
        ],
        &[
            json!({"identifier": "a", "version": "1", "output": "t", "mimeType": "m",
                   "magicLocation": "/x", "extraProperty": "e"}),
            json!({"identifier": "a", "version": "1", "output": "t", "a": 1, "b": 2, "c": 3}),
            json!({"identifier": "a", "version": "1"}),
        ],
        &[JsonMode::Compliant],
    );
}

/// `Github_medium---o48619`: `maxProperties` above the declared count,
/// extras with a schema.
#[test]
fn max_properties_with_typed_additional_properties() {
    check(
        json!({"type": "object",
               "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
               "additionalProperties": {"type": "string"},
               "maxProperties": 3}),
        &[
            json!({"city": "L", "country": "U"}),
            json!({"city": "L", "country": "U", "street": "s"}),
            json!({"zip": "1", "street": "s"}),
            json!({}),
        ],
        &[
            json!({"city": "L", "country": "U", "street": "s", "zip": "5"}),
            json!({"a": "1", "b": "2", "c": "3", "d": "4"}),
            json!({"city": "L", "zip": 5}),
        ],
    );
}

/// `Github_easy---o66294` / `Handwritten---dep6`: a minimum above the
/// required count (was "minProperties 3 with 2 required properties").
#[test]
fn min_properties_above_required() {
    check(
        json!({"type": "object",
               "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                              "c": {"type": "integer"}, "d": {"type": "integer"}},
               "required": ["a", "b"],
               "additionalProperties": false,
               "minProperties": 3}),
        &[
            json!({"a": 1, "b": 2, "c": 3}),
            json!({"a": 1, "b": 2, "d": 4}),
            json!({"a": 1, "b": 2, "c": 3, "d": 4}),
        ],
        &[
            json!({"a": 1, "b": 2}),
            json!({"a": 1, "c": 3, "d": 4}),
            json!({}),
        ],
    );
}

/// `Github_medium---o71300` / `o8454`: both bounds, no extras (was
/// "minProperties 1 with 0 required properties" beside `maxProperties`).
#[test]
fn min_and_max_properties_over_declared_keys() {
    check(
        json!({"type": "object",
               "properties": {"u": {"type": "string"}, "v": {"type": "string"},
                              "w": {"type": "integer"}, "x": {"type": "boolean"}},
               "additionalProperties": false,
               "minProperties": 2, "maxProperties": 3}),
        &[
            json!({"u": "a", "v": "b"}),
            json!({"u": "a", "w": 1, "x": true}),
            json!({"v": "b", "x": false}),
        ],
        &[
            json!({"u": "a"}),
            json!({}),
            json!({"u": "a", "v": "b", "w": 1, "x": true}),
        ],
    );
    check(
        json!({"type": "object",
               "properties": {"u": {"type": "string"}, "v": {"type": "string"},
                              "w": {"type": "integer"}},
               "additionalProperties": false,
               "minProperties": 1, "maxProperties": 1}),
        &[json!({"u": "a"}), json!({"w": 3})],
        &[json!({}), json!({"u": "a", "v": "b"})],
    );
}

/// A minimum reachable only with extras: extras count at most one toward
/// it (a repeated extra key parses to one property), so two declared keys
/// plus one extra satisfy `minProperties: 3`, and walks never produce an
/// object the oracle rejects even though they may repeat an extra key.
#[test]
fn min_properties_counts_extras_at_most_once() {
    check(
        json!({"type": "object",
               "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "additionalProperties": {"type": "integer"},
               "minProperties": 3}),
        &[
            json!({"a": 1, "b": 2, "zz": 3}),
            json!({"a": 1, "b": 2, "zz": 3, "y": 4}),
        ],
        &[
            json!({"a": 1, "b": 2}),
            json!({"a": 1}),
            json!({"a": 1, "zz": "s", "b": 2}),
        ],
    );
}

/// The bound on the counted text is reported with the knob that sets it.
#[test]
fn counted_members_over_the_text_limit_name_the_knob() {
    let mut props = serde_json::Map::new();
    for i in 0..30 {
        props.insert(format!("p{i}"), json!({"type": "string", "maxLength": 20}));
    }
    let schema = json!({"type": "object", "properties": props, "minProperties": 10,
                        "maxProperties": 20, "additionalProperties": false});
    let mut o = opts(Whitespace::Compact, JsonMode::Strict);
    o.max_regex_len = 1 << 16;
    let e = schema::compile(&schema, &o).expect_err("over the limit");
    assert!(e.to_string().contains("max_regex_len"), "{e}");
}

// ---------------------------------------------------------------------------
// Patterns: lookaround, and lengths that capping cannot meet

/// `JsonSchemaStore---web-types`: a negative lookahead after `^` (was
/// "\"^(?!pattern$).*$\" cannot be compiled").
#[test]
fn negative_lookahead_at_the_start() {
    check(
        json!({"type": "string", "pattern": "^(?!pattern$).*$"}),
        &[json!("patterns"), json!("x"), json!(""), json!("patter")],
        &[json!("pattern")],
    );
    check(
        json!({"type": "string", "pattern": "^(?=[a-z])(?!foo)[a-z0-9]*$", "maxLength": 6}),
        &[json!("fo"), json!("bar9"), json!("fop")],
        &[
            json!("foo"),
            json!("foobar"),
            json!("9ab"),
            json!("abcdefg"),
        ],
    );
}

/// A lookbehind before a trailing `$`.
#[test]
fn lookbehind_at_the_end() {
    check(
        json!({"type": "string", "pattern": "^[a-z.]+(?<!\\.tmp)$"}),
        &[json!("a.txt"), json!("tmp"), json!("x.tmpl")],
        &[json!("a.tmp"), json!(".tmp"), json!("A")],
    );
}

/// `Handwritten---allany14` / `Github_medium---o17563` /
/// `Github_medium---o23174`: unanchored patterns with both length bounds
/// (was "minLength 10 and maxLength 20 together with this pattern cannot be
/// compiled exactly"). A small product with the length language is exact;
/// these are too big for it (state elimination), so the match is narrowed
/// to the whole string (sound, with a warning).
#[test]
fn pattern_lengths_by_product() {
    check(
        json!({"type": "string", "pattern": "[aA][12].*[zZ]", "minLength": 10, "maxLength": 20}),
        &[json!("a1yyyyyyyz"), json!("A2zzzzzzzZ")],
        &[
            json!("a1z"),
            json!("xxa1yyyyyy"),
            json!("a1yyyyyyyyyyyyyyyyyyyyyz"),
        ],
    );
    check(
        json!({"type": "string", "pattern": ".+[@].+[.]___", "minLength": 10, "maxLength": 40}),
        &[json!("abcdef@h.___"), json!("abcd@e.___")],
        &[json!("a@b.___"), json!("me@host.com")],
    );
    check(
        json!({"type": "string", "pattern": "[A-z]+", "minLength": 3, "maxLength": 12}),
        &[json!("abc"), json!("Asia"), json!("[^_")],
        &[json!("12"), json!("123"), json!("abcdefghijklm")],
    );
}

/// `JsonSchemaStore---web-types`: the lookahead pattern as a
/// `patternProperties` key pattern (keys are matched by it too).
#[test]
fn lookahead_in_pattern_properties() {
    check(
        json!({"type": "object",
               "patternProperties": {"^(?!pattern$).*$": {"type": "integer"}},
               "properties": {"pattern": {"type": "string"}},
               "additionalProperties": false}),
        &[json!({"pattern": "x", "a": 1}), json!({"b": 2})],
        &[json!({"pattern": 1}), json!({"a": "s"})],
    );
}

/// `JsonSchemaStore---xs-app`: `format: "regex"` with `minLength: 1` (was
/// "format \"regex\" with length bounds: minLength 1 ... cannot be
/// compiled"): the non-empty matches, exactly.
#[test]
fn regex_format_with_min_length_one() {
    let schema = json!({"type": "string", "format": "regex", "minLength": 1});
    check(
        schema.clone(),
        &[json!("^/api/(.*)$"), json!("a"), json!("|"), json!("^")],
        &[json!(""), json!("(")],
    );
    for mode in MODES {
        let d = compile(&schema, Whitespace::Compact, mode);
        assert!(
            !d.matches(b"\"\""),
            "{mode:?}: the empty string has length 0"
        );
    }
}

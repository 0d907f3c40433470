//! Structural tags: XGrammar's JSON read with pointer-precise refusals, and
//! the languages it defines compiled exactly. The verdict tables were
//! recorded from XGrammar 0.2.8 (`xgrammar.testing._is_grammar_accept_string`
//! on the same tags); `tests/structural_tags_oracle.rs` checks constrain
//! against the installed package live where `scripts/oracle-venv` made it. Generation under budgets is checked
//! with adversarial token choices, the calls' arguments by `jsonschema`.

use constrain::tags::{StructuralTag, TagError};
use constrain::tools::{self, Reasoning, ToolChoice, ToolFormat};
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source, TokenId};
use constrain_testkit::budget::adversarial_run;
use rand::{rngs::StdRng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

mod tags_util;
use tags_util::*;

fn check(fmt: Value, cases: &[(&str, bool)]) {
    let (v, _) = vocab();
    let c = compile(&v, fmt.clone()).unwrap_or_else(|e| panic!("{fmt}: {e}"));
    for &(s, want) in cases {
        assert_eq!(accepts(&c, s), want, "{fmt}\n{s:?}");
    }
}

fn tag_x() -> Value {
    json!({"type": "tag", "begin": "<f=a>", "content": {"type": "const_string", "value": "X"}, "end": "</f>"})
}

#[test]
fn triggered_tags_in_all_four_modes() {
    let texts = [
        "",
        "hi",
        "<f=a>X</f>",
        "hi<f=a>X</f>",
        "<f=a>X</f>bye",
        "<f=a>X</f><f=a>X</f>",
        "hi<f=a>X</f>bye<f=a>X</f>",
        "<f=b",
        "hi<f=",
    ];
    // XGrammar's verdicts, per (at_least_one, stop_after_first).
    let verdicts = [
        (
            (false, false),
            [true, true, true, true, true, true, true, false, false],
        ),
        (
            (true, false),
            [false, false, true, false, true, true, false, false, false],
        ),
        (
            (false, true),
            [true, true, true, true, false, false, false, false, false],
        ),
        (
            (true, true),
            [false, false, true, false, false, false, false, false, false],
        ),
    ];
    for ((alo, saf), want) in verdicts {
        let fmt = json!({"type": "triggered_tags", "triggers": ["<f="], "tags": [tag_x()],
                         "at_least_one": alo, "stop_after_first": saf});
        let cases: Vec<(&str, bool)> = texts.iter().copied().zip(want).collect();
        check(fmt, &cases);
    }
}

#[test]
fn a_trigger_dispatches_where_it_first_completes() {
    let tag = json!({"type": "tag", "begin": "aab", "content": {"type": "const_string", "value": "X"}, "end": "E"});
    check(
        json!({"type": "triggered_tags", "triggers": ["aa"], "tags": [tag]}),
        &[
            ("aabXE", true),
            ("aaabXE", false),
            ("xaabXE", true),
            ("a", true),
            ("ab", true),
            ("aaa", false),
            ("aabXEaabXE", true),
            ("aabXEa", true),
        ],
    );
}

#[test]
fn excludes_hold_inside_each_free_run() {
    let fmt = json!({"type": "triggered_tags", "triggers": ["<f="], "tags": [tag_x()], "excludes": ["zz"]});
    check(
        fmt,
        &[
            ("zz", false),
            ("azz", false),
            ("<f=a>X</f>zz", false),
            ("z<f=a>X</f>z", true),
            ("<f=a>X</f>", true),
        ],
    );
    check(
        json!({"type": "any_text", "excludes": ["ab"]}),
        &[
            ("", true),
            ("a", true),
            ("b", true),
            ("ab", false),
            ("xaby", false),
            ("ba", true),
        ],
    );
    // The exclusion is of the free text alone, not of the end after it.
    check(
        json!({"type": "tag", "begin": "<t>", "content": {"type": "any_text", "excludes": ["x<"]}, "end": "</t>"}),
        &[
            ("<t>ax</t>", true),
            ("<t>x<</t>", false),
            ("<t>a</t>", true),
        ],
    );
}

#[test]
fn free_text_inside_a_tag_stops_at_its_end() {
    check(
        json!({"type": "tag", "begin": "<t>", "content": {"type": "any_text"}, "end": "aa"}),
        &[
            ("<t>aa", true),
            ("<t>xaa", true),
            ("<t>xaaa", true),
            ("<t>aaa", true),
            ("<t>xaax", false),
        ],
    );
    // Through a sequence, and through triggered tags.
    check(
        json!({"type": "tag", "begin": "<t>", "content": {"type": "sequence", "elements": [
            {"type": "any_text"}, {"type": "const_string", "value": "Q"}]}, "end": "</t>"}),
        &[
            ("<t>Q</t>", true),
            ("<t>aQ</t>", true),
            ("<t>a</t>Q</t>", false),
        ],
    );
    let inner = json!({"type": "triggered_tags", "triggers": ["<f="], "tags": [tag_x()]});
    check(
        json!({"type": "tag", "begin": "<t>", "content": inner, "end": "</t>"}),
        &[
            ("<t></t>", true),
            ("<t>hi</t>", true),
            ("<t>hi<f=a>X</f>yo</t>", true),
            ("<t>h</t>i</t>", false),
            ("<t><f=a>X</f></t>", true),
        ],
    );
    // Outside any tag, free text followed by more is plain concatenation.
    check(
        json!({"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "END"}]}),
        &[
            ("END", true),
            ("abcEND", true),
            ("aENDbEND", true),
            ("abc", false),
        ],
    );
}

#[test]
fn separators_repeats_and_alternatives() {
    let a = json!({"type": "tag", "begin": "<a>", "content": {"type": "const_string", "value": "X"}, "end": "</a>"});
    check(
        json!({"type": "tags_with_separator", "tags": [a.clone()], "separator": ","}),
        &[
            ("", true),
            ("<a>X</a>", true),
            ("<a>X</a>,<a>X</a>", true),
            ("<a>X</a>,", false),
        ],
    );
    check(
        json!({"type": "tags_with_separator", "tags": [a], "separator": ",", "at_least_one": true, "stop_after_first": true}),
        &[
            ("", false),
            ("<a>X</a>", true),
            ("<a>X</a>,<a>X</a>", false),
        ],
    );
    let ab = json!({"type": "or", "elements": [{"type": "const_string", "value": "a"}, {"type": "const_string", "value": "b"}]});
    check(
        json!({"type": "repeat", "min": 2, "max": 3, "content": ab}),
        &[("a", false), ("ab", true), ("bba", true), ("abab", false)],
    );
    check(
        json!({"type": "sequence", "elements": [
            {"type": "optional", "content": {"type": "const_string", "value": "-"}},
            {"type": "plus", "content": {"type": "regex", "pattern": "^[0-9]$"}},
            {"type": "star", "content": {"type": "const_string", "value": "!"}}]}),
        &[("7", true), ("-12!!", true), ("-", false), ("12-", false)],
    );
    check(
        json!({"type": "dispatch", "rules": [["<j>", {"type": "const_string", "value": "J"}]], "loop": false}),
        &[
            ("", true),
            ("x<j>J", true),
            ("x<j>Jy", false),
            ("x<j>", false),
        ],
    );
}

#[test]
fn an_embedded_schema_is_exact_and_a_recursive_one_runs_on_the_stack() {
    let args =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let tree = json!({"$defs": {"n": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "required": ["v"]}}, "$ref": "#/$defs/n"});
    let fmt = json!({"type": "triggered_tags", "triggers": ["<f="], "tags": [
        {"begin": "<f=w>", "content": {"type": "json_schema", "json_schema": args}, "end": "</f>"},
        {"begin": "<f=t>", "content": {"type": "json_schema", "json_schema": tree}, "end": "</f>"}]});
    let (v, _) = vocab();
    let c = compile(&v, fmt.clone()).unwrap();
    assert!(
        c.stats().fragments > 1,
        "the recursive schema needs fragments"
    );
    for (s, want) in [
        (r#"ok <f=w>{"city": "Oslo"}</f> done"#, true),
        (
            r#"<f=w>{"city":"Oslo"}</f><f=t>{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}</f>"#,
            true,
        ),
        (r#"<f=w>{"town": "Oslo"}</f>"#, false),
        (r#"<f=t>{"v":1,"kids":[{"kids":[]}]}</f>"#, false),
        (r#"<f=t>{"v":1,"kids":[{"v":2}</f>"#, false),
        (r#"<f=x>{}</f>"#, false),
    ] {
        assert_eq!(accepts(&c, s), want, "{s}");
    }
}

#[test]
fn any_order_json_takes_properties_in_every_order_once_each() {
    let args = json!({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["a", "b"], "additionalProperties": false});
    let fmt = json!({"type": "json_schema", "json_schema": args.clone(), "any_order": true});
    check(
        fmt,
        &[
            (r#"{"a":1,"b":"x"}"#, true),
            (r#"{"b":"x","a":1}"#, true),
            (r#"{"c":true,"b":"x","a":1}"#, true),
            (r#"{"b":"x","c":false,"a":2}"#, true),
            (r#"{"b":"x"}"#, false),
            (r#"{"a":1,"b":"x","a":2}"#, false),
            (r#"{"a":1,"b":"x","d":0}"#, false),
        ],
    );
    // Six properties: no permutation regex (each key's register bit), every
    // order still, each key once.
    let wide: serde_json::Map<String, Value> = (0..6)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    check(
        json!({"type": "json_schema", "any_order": true,
               "json_schema": {"type": "object", "properties": wide,
                               "additionalProperties": false}}),
        &[
            (r#"{"p5":5,"p0":0,"p3":3}"#, true),
            (r#"{"p1":1,"p2":2,"p0":0,"p4":4,"p5":5,"p3":3}"#, true),
            (r#"{"p5":5,"p0":0,"p5":3}"#, false),
            (r#"{"p6":6}"#, false),
        ],
    );
    // The XML styles too: each element once, in any order.
    check(
        json!({"type": "json_schema", "style": "qwen_xml", "any_order": true,
               "json_schema": args}),
        &[
            ("<parameter=b>x</parameter><parameter=a>1</parameter>", true),
            (
                "<parameter=c>true</parameter><parameter=a>1</parameter><parameter=b>x</parameter>",
                true,
            ),
            ("<parameter=a>1</parameter>", false),
            (
                "<parameter=a>1</parameter><parameter=b>x</parameter><parameter=a>2</parameter>",
                false,
            ),
        ],
    );
}

#[test]
fn cohere_values_nest_as_dicts_and_lists_with_their_kinds() {
    let args = json!({"type": "object", "properties": {
        "q": {"type": "string"},
        "opts": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        "v": {"enum": ["x", 7]}},
        "required": ["q", "opts"]});
    let fmt = json!({"type": "json_schema", "style": "cohere_xml", "json_schema": args});
    let q = r#"<cofl:value name="q" type="raw">it's <b>bold</b></cofl:value>"#;
    let opts = r#"<cofl:value name="opts" type="dict"><cofl:value name="n" type="json">3</cofl:value></cofl:value>"#;
    let tags = r#"<cofl:value name="tags" type="list"><cofl:value type="raw">a</cofl:value><cofl:value type="raw">b</cofl:value></cofl:value>"#;
    let three = r#"<cofl:value name="tags" type="list"><cofl:value type="raw">a</cofl:value><cofl:value type="raw">b</cofl:value><cofl:value type="raw">a</cofl:value></cofl:value>"#;
    let ok = [
        format!("{q}{opts}"),
        format!("{q}\n{opts}\n{tags}\n"),
        format!(r#"{q}{opts}<cofl:value name="v" type="json">7</cofl:value>"#),
        format!(r#"{q}{opts}<cofl:value name="v" type="raw">x</cofl:value>"#),
    ];
    let bad = [
        opts.to_string(),
        format!("{opts}{q}"),
        format!("{q}{opts}{three}"),
        format!(r#"{q}{opts}<cofl:value name="v" type="json">x</cofl:value>"#),
        format!(r#"{q}<cofl:value name="opts" type="json">{{"n": 3}}</cofl:value>"#),
        format!(r#"{q}<cofl:value name="opts" type="dict"></cofl:value>"#),
    ];
    let cases: Vec<(&str, bool)> = ok
        .iter()
        .map(|s| (s.as_str(), true))
        .chain(bad.iter().map(|s| (s.as_str(), false)))
        .collect();
    check(fmt, &cases);
    // A string with constraints is refused by name, with its pointer.
    let (v, _) = vocab();
    let err = compile(
        &v,
        json!({"type": "json_schema", "style": "cohere_xml", "json_schema":
               {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}}}),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("cohere_xml") && err.contains("/properties/s"),
        "{err}"
    );
}

#[test]
fn free_form_arguments_take_any_named_element() {
    check(
        json!({"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "object"}}),
        &[
            ("", true),
            ("<parameter=city>Oslo</parameter>", true),
            (
                "<parameter=a>1</parameter>\n<parameter=b> [1, 2] </parameter>",
                true,
            ),
            ("<parameter=9a>1</parameter>", false),
            ("<parameter=a>1", false),
        ],
    );
    check(
        json!({"type": "json_schema", "style": "kimi_k3_xml", "json_schema": true}),
        &[
            (
                "<|open|>argument key=\"k\" type=\"integer\"<|sep|>1<|close|>argument<|sep|>",
                true,
            ),
            (
                "<|open|>argument key=\"k\" type=\"text\"<|sep|>1<|close|>argument<|sep|>",
                false,
            ),
        ],
    );
}

/// Splits an output of the call format below into its calls' JSON texts.
fn calls(out: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = out;
    while let Some(i) = rest.find("<f=") {
        let after = &rest[i + 3..];
        let name_end = after.find('>').expect("a call's name is closed");
        let body = &after[name_end + 1..];
        let close = body.find("</f>").expect("a call is closed");
        found.push((after[..name_end].to_string(), body[..close].to_string()));
        rest = &body[close + 4..];
    }
    found
}

#[test]
fn budgets_never_cut_a_call_and_arguments_validate() {
    let args = json!({"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 6}, "days": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["city", "days"]});
    let tree = json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}}, "$ref": "#/$defs/n"});
    let fmt = json!({"type": "triggered_tags", "triggers": ["<f="], "tags": [
        {"begin": "<f=w>", "content": {"type": "json_schema", "json_schema": args.clone()}, "end": "</f>"},
        {"begin": "<f=t>", "content": {"type": "json_schema", "json_schema": tree.clone()}, "end": "</f>"}],
        "at_least_one": true});
    let (v, eos) = vocab();
    let c = compile(&v, fmt).unwrap();
    let wv = jsonschema::validator_for(&args).unwrap();
    let tv = jsonschema::validator_for(&tree).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for max_tokens in [12, 13, 16, 20, 30, 60] {
        for _ in 0..30 {
            let out = adversarial_run(&c, eos, max_tokens, 0.5, &mut rng)
                .unwrap_or_else(|e| panic!("max_tokens {max_tokens}: {e}"));
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with("<f="), "at_least_one: {text:?}");
            let found = calls(&text);
            assert!(!found.is_empty());
            for (name, body) in found {
                let value: Value = serde_json::from_str(&body)
                    .unwrap_or_else(|e| panic!("{text:?}: {body:?}: {e}"));
                let ok = match name.as_str() {
                    "w" => wv.is_valid(&value),
                    "t" => tv.is_valid(&value),
                    other => panic!("unknown call {other:?} in {text:?}"),
                };
                assert!(ok, "{text:?}");
            }
        }
    }
}

#[test]
fn the_legacy_shape_is_one_triggered_tags() {
    let legacy = json!({"type": "structural_tag",
        "structures": [{"begin": "<f=a>", "schema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, "end": "</f>"}],
        "triggers": ["<f="]});
    let (v, _) = vocab();
    let c = Compiler::new(v.clone(), CompilerConfig::default());
    let compiled = c
        .compile(&Source::structural_tag(&legacy).unwrap())
        .unwrap();
    assert!(accepts(&compiled, r#"hi <f=a>{"x": 1}</f>"#));
    assert!(!accepts(&compiled, r#"hi <f=a>{"x": "1"}</f>"#));
    assert!(accepts(&compiled, "no call at all"));
}

#[test]
fn malformed_and_unsupported_tags_are_refused_by_pointer() {
    let env = |f: Value| json!({"type": "structural_tag", "format": f});
    let cases = [
        (
            env(json!({"type": "nope"})),
            "/format/type",
            "unknown format type",
        ),
        (
            env(json!({"type": "sequence", "elements": []})),
            "/format/elements",
            "at least one",
        ),
        (
            env(json!({"type": "triggered_tags", "triggers": ["<f="], "tags": []})),
            "/format/tags",
            "must not be empty",
        ),
        (
            env(json!({"type": "triggered_tags", "triggers": ["<g="], "tags": [tag_x()]})),
            "/format/tags/0/begin",
            "none of the triggers",
        ),
        (
            env(
                json!({"type": "tag", "begin": "<a>", "content": {"type": "regex", "pattern": "("}, "end": "</a>"}),
            ),
            "/format/content/pattern",
            "bad regex",
        ),
        (
            env(json!({"type": "token", "token": 151657})),
            "/format/token",
            "no special token",
        ),
        (
            env(json!({"type": "any_text", "max_tokens": 10})),
            "/format/max_tokens",
            "max_tokens",
        ),
        (
            env(
                json!({"type": "json_schema", "json_schema": {"type": "object"}, "style": "minimax_m3_xml"}),
            ),
            "/format/style",
            "minimax_m3_xml",
        ),
        (
            env(json!({"type": "json_schema", "json_schema": {"type": "strnig"}})),
            "/format/json_schema",
            "",
        ),
        (
            env(json!({"type": "const_string"})),
            "/format/value",
            "must be a string",
        ),
        (json!([1, 2]), "(root)", "JSON object"),
    ];
    for (tag, pointer, words) in cases {
        let e = refusal(tag.clone());
        assert_eq!(
            e.pointer().map(|p| p.to_string()).as_deref(),
            Some(pointer),
            "{tag}: {e}"
        );
        assert!(e.to_string().contains(words), "{tag}: {e}");
    }
    assert!(matches!(
        StructuralTag::parse("{\"type\": "),
        Err(TagError::Json { line: 1, .. })
    ));
}

#[test]
fn qwen_vocabulary_free_text_is_nearly_free() {
    let Some(v) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: the Qwen tokenizer is not fetched (scripts/fetch-assets)");
        return;
    };
    let args =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let tag = json!({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": [
        {"begin": "<function=get_weather>", "content": {"type": "json_schema", "json_schema": args}, "end": "</function>"}]}});
    let c = Compiler::new(v.clone(), CompilerConfig::default())
        .compile(&Source::structural_tag(&tag).unwrap())
        .unwrap();
    // At the start, free text allows exactly the tokens that begin UTF-8
    // text (a complete prefix, or one cut inside its last character) and do
    // not complete the trigger (nor begin to complete it past their end:
    // `<function=` must be followed by a tag's rest, which `get_weather>`
    // starts, so a token holding the whole trigger and more is checked by
    // the walk below rather than here).
    let m = c.matcher();
    let begins_text = |b: &[u8]| match std::str::from_utf8(b) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    let mut expected = 0;
    for (t, b) in v.text_tokens() {
        if !begins_text(b) {
            assert!(
                !m.allows(t),
                "{:?} does not begin UTF-8 text",
                v.describe(t)
            );
            continue;
        }
        let holds = b.windows(10).any(|w| w == b"<function=");
        if !holds {
            expected += 1;
            assert!(m.allows(t), "free text refuses {}", v.describe(t));
        }
    }
    assert!(m.allowed().len() >= expected);
    let tok = constrain_testkit::assets::qwen_tokenizer().unwrap();
    let mut m = c.matcher();
    let text = "Let me check.\n<function=get_weather>{\"city\": \"Oslo\"}</function> Done.";
    for t in tok.encode(text).unwrap() {
        assert!(m.accept_token(t), "{text}");
    }
    assert!(m.is_accepting());
}

fn tools_tag(
    format: ToolFormat,
    choice: ToolChoice,
    parallel: bool,
    reasoning: Reasoning,
) -> Arc<Compiled> {
    let (v, _) = vocab();
    let tag =
        tools::structural_tag(format, &weather_tools(), &choice, parallel, reasoning).unwrap();
    Compiler::new(v, CompilerConfig::default())
        .compile(&Source::StructuralTag {
            tag,
            options: StructuralTag::schema_options(),
        })
        .unwrap()
}

#[test]
fn qwen_calls_under_every_tool_choice() {
    let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    let time =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
    let text = "Let me look.";
    let two = format!("{call}\n{time}");
    let cases: [(ToolChoice, bool, [bool; 5]); 5] = [
        // (choice, parallel, [text, call, text+call, two calls, bad args])
        (ToolChoice::Auto, true, [true, true, true, true, false]),
        (ToolChoice::Auto, false, [true, true, true, false, false]),
        (
            ToolChoice::Required,
            true,
            [false, true, false, true, false],
        ),
        (ToolChoice::None, true, [true, false, false, false, false]),
        (
            ToolChoice::Function("get_time".into()),
            true,
            [false, false, false, false, false],
        ),
    ];
    let bad = call.replace("city", "town");
    for (choice, parallel, want) in cases {
        let c = tools_tag(
            ToolFormat::Qwen3,
            choice.clone(),
            parallel,
            Reasoning::Disabled,
        );
        let got = [
            accepts(&c, text),
            accepts(&c, call),
            accepts(&c, &format!("{text}\n{call}")),
            accepts(&c, &two),
            accepts(&c, &bad),
        ];
        assert_eq!(got, want, "{choice:?} parallel {parallel}");
    }
    let c = tools_tag(
        ToolFormat::Qwen3,
        ToolChoice::Function("get_time".into()),
        true,
        Reasoning::Disabled,
    );
    assert!(accepts(&c, time) && !accepts(&c, call));
    let (v, _) = vocab();
    let none = tools::structural_tag(
        ToolFormat::Qwen3,
        &weather_tools(),
        &ToolChoice::Function("nope".into()),
        true,
        Reasoning::Disabled,
    );
    assert!(none.is_err());
    drop(v);
}

#[test]
fn reasoning_comes_first_and_nothing_binds_inside_it() {
    let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    let c = tools_tag(
        ToolFormat::Qwen3,
        ToolChoice::Required,
        true,
        Reasoning::Enabled,
    );
    // The prompt opened <think>: the output is the thinking, its end, then calls.
    let thought = "The user wants {weather\"; maybe <tool_call> later";
    assert!(accepts(&c, &format!("{thought}</think>\n\n{call}")));
    assert!(
        !accepts(&c, &format!("{thought}</think>\n\nhello")),
        "required: a call after the thinking"
    );
    assert!(!accepts(&c, call), "the thinking must be closed first");
    assert!(
        !accepts(&c, &format!("a<think>b</think>\n\n{call}")),
        "no nested <think>"
    );
    // </think> is never blocked inside the thinking.
    let mut m = c.matcher();
    for b in "plan".bytes() {
        assert!(m.accept_token(TokenId(b as u32)));
    }
    let (v, _) = vocab();
    let close = v.text_tokens().find(|(_, b)| *b == b"</think>").unwrap().0;
    assert!(m.allows(close));
    let c = tools_tag(ToolFormat::Qwen3, ToolChoice::Auto, true, Reasoning::Auto);
    assert!(accepts(&c, "plain answer"));
    assert!(accepts(&c, &format!("<think>hm</think>\n\n{call}")));
}

#[test]
fn llama_and_mistral_calls() {
    let c = tools_tag(
        ToolFormat::Llama,
        ToolChoice::Auto,
        true,
        Reasoning::Disabled,
    );
    assert!(accepts(
        &c,
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"
    ));
    assert!(!accepts(
        &c,
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"
    ));
    let c = tools_tag(
        ToolFormat::Mistral,
        ToolChoice::Required,
        true,
        Reasoning::Disabled,
    );
    assert!(accepts(
        &c,
        "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]"
    ));
    assert!(!accepts(&c, "sure"));
    assert_eq!(ToolFormat::from_name("qwen_3"), Some(ToolFormat::Qwen3));
    assert_eq!(
        ToolFormat::from_chat_template("{% if tools %}<tool_call>{% endif %}"),
        Some(ToolFormat::Qwen3)
    );
    for f in ToolFormat::ALL {
        assert_eq!(ToolFormat::from_name(f.name()), Some(f));
    }
}

#[test]
fn special_tokens_are_symbols_where_their_text_is_a_marker() {
    let (v, [eos, call, end_call, think, end_think]) = vocab_with_specials();
    assert_eq!(v.decode(&[call]), b"<tool_call>");
    let compiler = Compiler::new(v.clone(), CompilerConfig::default());
    let tag = tools::structural_tag(
        ToolFormat::Qwen3,
        &weather_tools(),
        &ToolChoice::Auto,
        true,
        Reasoning::Enabled,
    )
    .unwrap();
    let c = compiler
        .compile(&Source::StructuralTag {
            tag,
            options: StructuralTag::schema_options(),
        })
        .unwrap();
    let mut m = c.matcher();
    // Inside the thinking: `</think>` as a token is allowed, `<think>` and
    // `<tool_call>` are not (free text holds no special token).
    assert!(m.allows(end_think) && !m.allows(think) && !m.allows(call) && !m.allows(eos));
    for b in "hm".bytes() {
        assert!(m.accept_token(TokenId(b as u32)));
    }
    assert!(m.accept_token(end_think));
    for b in "\n\nOK.".bytes() {
        assert!(m.accept_token(TokenId(b as u32)));
    }
    // In the answer: the call opens with the token or with its text.
    assert!(m.allows(call) && m.allows(TokenId(b'<' as u32)) && !m.allows(end_call));
    assert!(m.allows(eos), "text alone is a complete answer");
    assert!(m.accept_token(call));
    for b in "\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n".bytes() {
        assert!(m.accept_token(TokenId(b as u32)), "{}", b as char);
    }
    assert!(m.allows(end_call) && !m.allows(eos));
    assert!(m.accept_token(end_call) && m.is_accepting());
    // A JSON Schema never allows a special token, and the single bytes no
    // UTF-8 text holds are in no mask.
    let j = compiler
        .compile(&Source::json_schema(json!({"type": "string"})))
        .unwrap();
    let mut m = j.matcher();
    assert!(m.accept_token(TokenId(b'"' as u32)));
    for t in [
        call,
        end_call,
        think,
        end_think,
        TokenId(0xC0),
        TokenId(0xC1),
    ] {
        assert!(!m.allows(t), "{t:?}");
    }
}

#[test]
fn xml_styles_write_raw_strings_and_json_values_in_schema_order() {
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "days"]});
    let fmt = |style: &str| json!({"type": "json_schema", "json_schema": schema, "style": style});
    check(
        fmt("qwen_xml"),
        &[
            ("<parameter=city>Paris \"1\"</parameter><parameter=days> 3\n</parameter>", true),
            ("<parameter=city>x</parameter>\n<parameter=days>3</parameter><parameter=unit>c</parameter>\n", true),
            ("<parameter=city>x</parameter><parameter=days>\"3\"</parameter>", false),
            ("<parameter=city>x</parameter><parameter=unit>c</parameter><parameter=days>3</parameter>", false),
            ("<parameter=city>x</parameter><parameter=days>3</parameter><parameter=unit>\"c\"</parameter>", false),
            ("<parameter=city>x</parameter>", false),
        ],
    );
    check(
        fmt("deepseek_xml"),
        &[
            ("<｜DSML｜parameter name=\"city\" string=\"true\">x</｜DSML｜parameter><｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>", true),
            ("<｜DSML｜parameter name=\"city\" string=\"true\">x</｜DSML｜parameter><｜DSML｜parameter name=\"days\" string=\"true\">3</｜DSML｜parameter>", false),
        ],
    );
    check(
        fmt("kimi_k3_xml"),
        &[
            ("<|open|>argument key=\"city\" type=\"string\"<|sep|>x<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>", true),
            ("<|open|>argument key=\"city\" type=\"string\"<|sep|>x<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"string\"<|sep|>3<|close|>argument<|sep|>", false),
        ],
    );
    // A style that nests XML, and a constrained raw string: refused, by name, with a pointer.
    let (v, _) = vocab();
    for (f, at) in [
        (fmt("minimax_m3_xml"), "/format/style"),
        (
            json!({"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "object",
                "properties": {"s": {"type": "string", "maxLength": 3}}}}),
            "/format/json_schema/properties/s",
        ),
    ] {
        let Err(CompileError::Tag(e)) = compile(&v, f) else {
            panic!("not refused")
        };
        assert!(matches!(e, TagError::Unsupported { .. }), "{e}");
        assert_eq!(e.pointer().unwrap().to_string(), at, "{e}");
    }
}

#[test]
fn qwen_coder_xml_calls_under_auto_and_required() {
    let call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>";
    let time = "<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>";
    let auto = tools_tag(
        ToolFormat::Qwen3Coder,
        ToolChoice::Auto,
        true,
        Reasoning::Disabled,
    );
    assert!(accepts(&auto, "Let me look."));
    assert!(accepts(&auto, &format!("Let me look.\n{call}")));
    assert!(accepts(&auto, &format!("{call}\n{time}")));
    // A missing required parameter, an unknown function, JSON arguments.
    assert!(!accepts(&auto, &call.replace("city", "town")));
    assert!(!accepts(&auto, &call.replace("get_weather", "get_wind")));
    assert!(!accepts(
        &auto,
        "<tool_call>\n<function=get_weather>\n{\"city\": \"Oslo\"}\n</function>\n</tool_call>"
    ));
    let required = tools_tag(
        ToolFormat::Qwen3Coder,
        ToolChoice::Required,
        false,
        Reasoning::Disabled,
    );
    assert!(accepts(&required, call));
    assert!(!accepts(&required, "Let me look."));
    assert!(!accepts(&required, &format!("{call}\n{time}")));
    let named = tools_tag(
        ToolFormat::Qwen3Coder,
        ToolChoice::Function("get_time".into()),
        true,
        Reasoning::Disabled,
    );
    assert!(accepts(&named, time) && !accepts(&named, call));
}

#[test]
fn llama_calls_open_bare_or_after_the_python_tag() {
    let bare = "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}";
    let tagged = format!("<|python_tag|>{bare}");
    let auto = tools_tag(
        ToolFormat::Llama,
        ToolChoice::Auto,
        true,
        Reasoning::Disabled,
    );
    assert!(accepts(&auto, bare) && accepts(&auto, &tagged));
    assert!(accepts(&auto, &format!("Sure. {tagged}")));
    assert!(!accepts(&auto, &tagged.replace("zone", "area")));
    let none = tools_tag(
        ToolFormat::Llama,
        ToolChoice::None,
        true,
        Reasoning::Disabled,
    );
    assert!(accepts(&none, "Plain words.") && !accepts(&none, &tagged) && !accepts(&none, bare));
}

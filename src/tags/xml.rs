//! # XML-style arguments: a `json_schema` format with a `style` other than `json`
//!
//! Several model families write a call's arguments not as a JSON object but
//! as one XML-ish element per property: Qwen3-Coder's
//! `<parameter=KEY>VALUE</parameter>`, MiniMax's `<parameter name="KEY">`,
//! GLM's `<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>`, DeepSeek's
//! `<｜DSML｜parameter name="KEY" string="true|false">`, Kimi-K3's
//! `<|open|>argument key="KEY" type="TYPE"<|sep|>VALUE<|close|>argument<|sep|>`.
//! XGrammar 0.2.8 defines each of these as a `style` of its `json_schema`
//! format; this module lowers one to the schema compiler's regex text, the
//! language XGrammar's own grammar for the style describes:
//!
//! * the object's properties in schema order (in any order, each at most
//!   once, under `any_order`), each required one present, each optional
//!   one present or not, with JSON whitespace before each
//!   element and after the last (bounded per slot by the tag's whitespace
//!   option, where XGrammar allows any amount);
//! * a string value is **raw**: any text up to the element's closing marker
//!   (`{"type": "string"}`), or the raw text of a string `const` / `enum`;
//! * any other value is JSON (nested objects included), with whitespace
//!   either side, compiled by the schema compiler from the property's
//!   schema (the root's `$defs` / `definitions` kept reachable).
//!
//! [`Parts`] is one property's value split into those two kinds, which is
//! what the styles that mark the kind (`string="true"`, `type="number"`)
//! need. What does not split exactly — a string with constraints
//! (`pattern`, `maxLength`, …), an untyped property, extra properties,
//! a recursive property schema, and `minimax_m3_xml` — is refused by name.
//! Cohere's nesting style is [`super::cohere`].

use super::text::Texts;
use super::TagError;
use crate::schema::regex::{compile_fragments_compact, SchemaFragments};
use crate::schema::{Pointer, SchemaOptions, SchemaWarning, Whitespace};
use serde_json::{Map, Value};

/// The flat XML styles, their element shape.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Qwen,
    Minimax,
    Glm,
    Kimi,
    /// DeepSeek v3.2 (`false`) or v4.1 (`true`: a space before `parameter`).
    DeepSeek(bool),
}

/// One property's value: raw string alternatives and JSON alternatives.
#[derive(Default)]
struct Parts {
    /// Any raw text up to the closing marker.
    plain: bool,
    /// Raw string literals (regex).
    raw: Vec<String>,
    /// JSON alternatives (regex).
    json: Vec<String>,
    /// Kimi's type names the value may carry.
    types: Vec<&'static str>,
}

/// Keywords that say nothing about a value's language.
pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$id",
    "$schema",
];

const KIMI_TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// Whether the style is one this module knows by name (lowered or refused
/// here rather than as an unknown style).
pub(super) fn is_xml_style(style: &str) -> bool {
    matches!(
        style,
        "qwen_xml"
            | "minimax_xml"
            | "glm_xml"
            | "kimi_k3_xml"
            | "deepseek_xml"
            | "deepseek_v4_1_xml"
            | "cohere_xml"
            | "minimax_m3_xml"
    )
}

/// Lowers `schema` written in `style` to regex text (`None`: no text).
pub(super) fn lower(
    schema: &Value,
    style: &str,
    at: &Pointer,
    opts: &SchemaOptions,
    texts: &Texts<'_>,
    warnings: &mut Vec<SchemaWarning>,
) -> Result<Option<String>, TagError> {
    let st = match style {
        "qwen_xml" => Style::Qwen,
        "minimax_xml" => Style::Minimax,
        "glm_xml" => Style::Glm,
        "kimi_k3_xml" => Style::Kimi,
        "deepseek_xml" => Style::DeepSeek(false),
        "deepseek_v4_1_xml" => Style::DeepSeek(true),
        "cohere_xml" => return super::cohere::lower(schema, at, opts, texts, warnings),
        _ => {
            return Err(TagError::Unsupported {
                pointer: at.push("style"),
                construct: format!("json_schema style {style:?}"),
                reason: if is_xml_style(style) {
                    "a style that nests XML elements inside values is not supported yet".into()
                } else {
                    "XGrammar 0.2.8 defines no such style".into()
                },
            })
        }
    };
    let sp = at.push("json_schema");
    let refuse = |pointer: Pointer, reason: String| TagError::Unsupported {
        pointer,
        construct: format!("json_schema style {style:?}"),
        reason,
    };
    let ws = whitespace(opts);
    if is_free_form(schema) {
        let parts = free_form_parts(st, opts, &sp, warnings).map_err(|(p, why)| refuse(p, why))?;
        let element = render(st, &Key::Any, &parts, &ws, texts, &sp)?;
        return Ok(Some(match element {
            Some(e) => format!("(?:{e})*{ws}"),
            None => ws,
        }));
    }
    let Some(obj) = schema.as_object() else {
        return Err(refuse(
            sp,
            "the arguments schema must be an object schema".into(),
        ));
    };
    let (props, required) = members(obj, &sp).map_err(|(p, why)| refuse(p, why))?;
    // Each property that can be written: its element and whether required.
    let mut elements: Vec<(String, bool)> = Vec::new();
    for (key, sub) in props {
        let pp = sp.push("properties").push(key);
        let parts = value(sub, obj, &pp, opts, warnings, 0).map_err(|(p, why)| refuse(p, why))?;
        let element = render(st, &Key::Named(key), &parts, &ws, texts, &pp)?;
        let is_required = required.contains(&key.as_str());
        match element {
            Some(e) => elements.push((e, is_required)),
            None if is_required => return Ok(None),
            None => {}
        }
    }
    let mut out =
        sequence(&elements, opts, &at.push("any_order")).map_err(|(p, why)| refuse(p, why))?;
    out.push_str(&ws);
    Ok(Some(out))
}

/// References and nesting deeper than this are refused.
pub(super) const MAX_DEPTH: usize = 16;

/// Whether `o` holds no keyword but `keys` and annotations.
pub(super) fn only(o: &Map<String, Value>, keys: &[&str]) -> bool {
    o.keys()
        .all(|k| keys.contains(&k.as_str()) || ANNOTATIONS.contains(&k.as_str()))
}

/// JSON whitespace between elements, bounded per slot.
pub(super) fn whitespace(opts: &SchemaOptions) -> String {
    match opts.whitespace {
        Whitespace::Flexible { max } => format!("[ \\t\\n\\r]{{0,{max}}}"),
        Whitespace::Compact | Whitespace::Python => String::new(),
    }
}

/// An object schema's declared properties and required keys, refusing
/// what the XML styles cannot write: other keywords, undeclared properties
/// (an object with no properties must say `additionalProperties: false`),
/// a required key that is not declared.
pub(super) fn members<'a>(
    obj: &'a Map<String, Value>,
    at: &Pointer,
) -> Result<(&'a Map<String, Value>, Vec<&'a str>), Refusal> {
    if let Some(t) = obj.get("type") {
        if t != "object" {
            return Err((at.push("type"), "an object schema was expected".into()));
        }
    }
    for k in obj.keys() {
        let ok = matches!(
            k.as_str(),
            "type" | "properties" | "required" | "additionalProperties" | "$defs" | "definitions"
        ) || ANNOTATIONS.contains(&k.as_str());
        if !ok {
            return Err((at.push(k), format!("the keyword {k:?} on an object")));
        }
    }
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let props = match obj.get("properties") {
        None => EMPTY.get_or_init(Map::new),
        Some(Value::Object(m)) => m,
        Some(_) => return Err((at.push("properties"), "not an object".into())),
    };
    match obj.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        None if !props.is_empty() => {}
        _ => {
            return Err((
                at.push("additionalProperties"),
                "properties beyond the listed ones".into(),
            ))
        }
    }
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(r) = required.iter().find(|r| !props.contains_key(**r)) {
        return Err((
            at.push("required"),
            format!("the required property {r:?} is not listed in properties"),
        ));
    }
    Ok((props, required))
}

/// The elements (each with whether it is required) in schema order, or in
/// every order under `opts.any_order`, refused at `at` past its limits.
pub(super) fn sequence(
    elements: &[(String, bool)],
    opts: &SchemaOptions,
    at: &Pointer,
) -> Result<String, Refusal> {
    if !opts.any_order || elements.len() < 2 {
        return Ok(elements
            .iter()
            .map(|(e, r)| format!("(?:{e}){}", if *r { "" } else { "?" }))
            .collect());
    }
    if elements.len() > opts.any_order_max_properties {
        return Err((
            at.clone(),
            format!(
                "{} properties in any order pass the limit of {} (any_order_max_properties)",
                elements.len(),
                opts.any_order_max_properties
            ),
        ));
    }
    let tree = any_order(elements);
    if tree.len() > opts.any_order_max_len {
        return Err((
            at.clone(),
            format!(
                "the properties in any order take {} bytes of regex, over the limit of {} \
                 (any_order_max_len)",
                tree.len(),
                opts.any_order_max_len
            ),
        ));
    }
    Ok(tree)
}

/// The schema a local `$ref` (`#/$defs/NAME`, `#/definitions/NAME`) names.
pub(super) fn follow_ref<'a>(
    r: &str,
    root: &'a Map<String, Value>,
    at: &Pointer,
) -> Result<&'a Value, Refusal> {
    r.strip_prefix("#/$defs/")
        .map(|n| ("$defs", n))
        .or_else(|| r.strip_prefix("#/definitions/").map(|n| ("definitions", n)))
        .and_then(|(d, n)| root.get(d)?.get(n))
        .ok_or_else(|| (at.push("$ref"), format!("the reference {r:?}")))
}

/// The elements in every order, each at most once and every required one
/// present: a choice of the next element, then the rest in any order.
pub(super) fn any_order(elements: &[(String, bool)]) -> String {
    if elements.is_empty() {
        return String::new();
    }
    let mut branches: Vec<String> = (0..elements.len())
        .map(|i| {
            let mut rest = elements.to_vec();
            let (e, _) = rest.remove(i);
            format!("(?:{e}){}", any_order(&rest))
        })
        .collect();
    let all_optional = elements.iter().all(|(_, r)| !r);
    if all_optional {
        branches.push(String::new());
    }
    format!("(?:{})", branches.join("|"))
}

pub(super) type Refusal = (Pointer, String);

/// Whether `schema` leaves the arguments free: `true`, `{}`, or an object
/// schema with no properties that does not close the object.
fn is_free_form(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(o) => o.iter().all(|(k, v)| match k.as_str() {
            "type" => v == "object",
            "additionalProperties" => v == &Value::Bool(true),
            "properties" => v.as_object().is_some_and(Map::is_empty),
            k => ANNOTATIONS.contains(&k),
        }),
        _ => false,
    }
}

/// A free-form property's value, as XGrammar 0.2.8 writes one: raw text
/// or a JSON array or object (DeepSeek's `string="false"` any JSON but a
/// string), any of Kimi's type names.
fn free_form_parts(
    st: Style,
    opts: &SchemaOptions,
    at: &Pointer,
    warnings: &mut Vec<SchemaWarning>,
) -> Result<Parts, Refusal> {
    let root = Map::new();
    let mut kinds = vec![
        serde_json::json!({"type": "array", "items": true}),
        serde_json::json!({"type": "object", "additionalProperties": true}),
    ];
    if matches!(st, Style::DeepSeek(_)) {
        kinds.push(serde_json::json!({"type": ["number", "boolean", "null"]}));
    }
    let mut json_alts = Vec::new();
    for k in &kinds {
        json_alts.push(json(k, &root, at, opts, warnings)?);
    }
    Ok(Parts {
        plain: true,
        raw: Vec::new(),
        json: json_alts,
        types: KIMI_TYPES.to_vec(),
    })
}

/// A property's value as [`Parts`].
fn value(
    s: &Value,
    root: &Map<String, Value>,
    at: &Pointer,
    opts: &SchemaOptions,
    warnings: &mut Vec<SchemaWarning>,
    depth: usize,
) -> Result<Parts, Refusal> {
    if depth > MAX_DEPTH {
        return Err((at.clone(), "references nest too deeply".into()));
    }
    let Some(o) = s.as_object() else {
        return Err((
            at.clone(),
            "a boolean property schema (any value) is not supported".into(),
        ));
    };
    let only = |keys: &[&str]| only(o, keys);
    let mut parts = Parts::default();
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        if !only(&["$ref"]) {
            return Err((at.clone(), "\"$ref\" beside other keywords".into()));
        }
        let t = follow_ref(r, root, at)?;
        return value(t, root, at, opts, warnings, depth + 1);
    }
    if let Some(v) = o.get("const") {
        if !only(&["const", "type"]) {
            return Err((at.clone(), "\"const\" beside other keywords".into()));
        }
        literal(v, &mut parts);
        return Ok(parts);
    }
    if let Some(e) = o.get("enum") {
        let (true, Some(items)) = (only(&["enum", "type"]), e.as_array()) else {
            return Err((at.clone(), "\"enum\" beside other keywords".into()));
        };
        for v in items {
            literal(v, &mut parts);
        }
        return Ok(parts);
    }
    for k in ["anyOf", "oneOf", "allOf"] {
        let Some(branches) = o.get(k) else { continue };
        let (true, Some(bs)) = (only(&[k]), branches.as_array()) else {
            return Err((at.clone(), format!("\"{k}\" beside other keywords")));
        };
        if k == "allOf" && bs.len() != 1 {
            return Err((at.push(k), "\"allOf\" of more than one schema".into()));
        }
        for (i, b) in bs.iter().enumerate() {
            let p = value(
                b,
                root,
                &at.push(k).push_index(i),
                opts,
                warnings,
                depth + 1,
            )?;
            parts.plain |= p.plain;
            parts.raw.extend(p.raw);
            parts.json.extend(p.json);
            for t in p.types {
                if !parts.types.contains(&t) {
                    parts.types.push(t);
                }
            }
        }
        return Ok(parts);
    }
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => {
            return Err((
                at.clone(),
                "a property without a type (any value) is not supported".into(),
            ))
        }
    };
    if types.contains(&"string") {
        if !only(&["type"]) {
            return Err((
                at.clone(),
                "a string property with constraints (its raw text would need them) is not supported"
                    .into(),
            ));
        }
        parts.plain = true;
        parts.types.push("string");
        for t in types.iter().filter(|t| **t != "string") {
            let one = Value::Object(Map::from_iter([("type".into(), Value::from(*t))]));
            parts.json.push(json(&one, root, at, opts, warnings)?);
            parts.types.push(kimi_type(t));
        }
        return Ok(parts);
    }
    parts.json.push(json(s, root, at, opts, warnings)?);
    for t in types {
        let t = kimi_type(t);
        if !parts.types.contains(&t) {
            parts.types.push(t);
        }
    }
    Ok(parts)
}

/// Kimi-K3's name of a JSON type (XGrammar writes `number` for integers).
fn kimi_type(t: &str) -> &'static str {
    match t {
        "string" => "string",
        "integer" | "number" => "number",
        "boolean" => "boolean",
        "object" => "object",
        "array" => "array",
        _ => "null",
    }
}

/// A `const` / `enum` item: raw text for a string, its JSON otherwise.
fn literal(v: &Value, parts: &mut Parts) {
    let name = match v {
        Value::String(s) => {
            parts.raw.push(regex_syntax::escape(s));
            "string"
        }
        other => {
            parts.json.push(regex_syntax::escape(&other.to_string()));
            match other {
                Value::Number(_) => "number",
                Value::Bool(_) => "boolean",
                Value::Null => "null",
                Value::Array(_) => "array",
                _ => "object",
            }
        }
    };
    if !parts.types.contains(&name) {
        parts.types.push(name);
    }
}

/// A non-string property's JSON, with the root's definitions reachable.
pub(super) fn json(
    s: &Value,
    root: &Map<String, Value>,
    at: &Pointer,
    opts: &SchemaOptions,
    warnings: &mut Vec<SchemaWarning>,
) -> Result<String, Refusal> {
    let mut s = s.clone();
    if let Some(o) = s.as_object_mut() {
        for d in ["$defs", "definitions"] {
            if let (Some(v), false) = (root.get(d), o.contains_key(d)) {
                o.insert(d.into(), v.clone());
            }
        }
    }
    match compile_fragments_compact(&s, opts) {
        Ok(SchemaFragments::Regex(c)) => {
            warnings.extend(c.warnings);
            Ok(format!("(?:{})", c.regex))
        }
        Ok(SchemaFragments::Fragments { .. }) => Err((
            at.clone(),
            "a recursive property schema is not supported".into(),
        )),
        Err(e) => Err((at.clone(), format!("its schema: {e}"))),
    }
}

fn alt(items: &[String]) -> String {
    format!("(?:{})", items.join("|"))
}

/// A property's key as an element writes it.
enum Key<'a> {
    /// A declared property.
    Named(&'a str),
    /// Any key of a free-form object: an XML name.
    Any,
}

impl Key<'_> {
    /// The key's regex (`escaped`: as an XML attribute value).
    fn regex(&self, escaped: bool) -> String {
        match self {
            Key::Named(k) if escaped => regex_syntax::escape(&xml_escape(k)),
            Key::Named(k) => regex_syntax::escape(k),
            Key::Any => "[a-zA-Z_][a-zA-Z0-9_]*".into(),
        }
    }
}

/// One property's element in `st` (`None`: no value admits text).
fn render(
    st: Style,
    key: &Key<'_>,
    p: &Parts,
    ws: &str,
    texts: &Texts<'_>,
    at: &Pointer,
) -> Result<Option<String>, TagError> {
    let lit = regex_syntax::escape;
    let close = match st {
        Style::Qwen | Style::Minimax => "</parameter>",
        Style::Glm => "</arg_value>",
        Style::Kimi => "<|close|>argument<|sep|>",
        Style::DeepSeek(false) => "</｜DSML｜parameter>",
        Style::DeepSeek(true) => "</｜DSML｜ parameter>",
    };
    // Raw string text: anything up to the closing marker (which has no
    // border, so the first occurrence is the one written after it).
    let free = if p.plain {
        texts.free(&[close.to_string()], None, at)?
    } else {
        None
    };
    let mut strings: Vec<String> = free.into_iter().collect();
    strings.extend(p.raw.iter().cloned());
    let json = &p.json;
    let either = |strings: &[String]| -> Option<String> {
        if strings.is_empty() && json.is_empty() {
            return None;
        }
        if p.plain && strings.len() == 1 && json.is_empty() {
            return Some(strings[0].clone());
        }
        let all: Vec<String> = strings.iter().chain(json).cloned().collect();
        Some(format!("{ws}{}{ws}", alt(&all)))
    };
    let head = match st {
        Style::Qwen => format!("<parameter={}>", key.regex(false)),
        Style::Minimax => format!("<parameter name=\"{}\">", key.regex(false)),
        Style::Glm => format!("<arg_key>{}</arg_key>{ws}<arg_value>", key.regex(false)),
        Style::Kimi => {
            let names: Vec<String> = if p.types.len() == 1 {
                vec![lit(p.types[0])]
            } else {
                KIMI_TYPES.iter().map(|t| lit(t)).collect()
            };
            format!(
                "<\\|open\\|>argument key=\"{}\" type=\"{}\"<\\|sep\\|>",
                key.regex(true),
                alt(&names)
            )
        }
        Style::DeepSeek(v41) => {
            let open = if v41 {
                "<｜DSML｜ parameter"
            } else {
                "<｜DSML｜parameter"
            };
            let mut kinds = Vec::new();
            if !strings.is_empty() {
                kinds.push(format!("{}{}", lit("\" string=\"true\">"), alt(&strings)));
            }
            if !json.is_empty() {
                kinds.push(format!(
                    "{}{ws}{}{ws}",
                    lit("\" string=\"false\">"),
                    alt(json)
                ));
            }
            if kinds.is_empty() {
                return Ok(None);
            }
            return Ok(Some(format!(
                "{ws}{} name=\"{}{}{}",
                lit(open),
                key.regex(false),
                alt(&kinds),
                lit(close)
            )));
        }
    };
    Ok(either(&strings).map(|v| format!("{ws}{head}{v}{}", lit(close))))
}

/// `&`, `"`, `<` and `>` as XML entities (Kimi-K3 writes keys so).
fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

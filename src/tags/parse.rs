//! Reading XGrammar's structural-tag JSON into a [`Format`] tree.
//!
//! The shapes are XGrammar's (`python/xgrammar/structural_tag.py` and its
//! C++ parser): the envelope `{"type": "structural_tag", "format": F}`, the
//! legacy `{"type": "structural_tag", "structures": [...], "triggers":
//! [...]}`, and a bare format object. A format without `type` is read as
//! the first kind whose fields it has, `tag` first, as XGrammar's parser
//! does. Every refusal names the JSON Pointer of the offending value.

use super::{Format, Tag, TagError, TokenName, TokenRef};
use crate::schema::Pointer;
use serde_json::{Map, Value};

/// Reads a whole structural tag (the envelope, the legacy shape, or a bare
/// format).
pub fn parse(value: &Value) -> Result<Format, TagError> {
    let root = Pointer::root();
    let Value::Object(obj) = value else {
        return Err(invalid(&root, "a structural tag must be a JSON object"));
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("structural_tag") => {
            if let Some(f) = obj.get("format") {
                return format(f, &root.push("format"));
            }
            if obj.contains_key("structures") {
                return legacy(obj, &root);
            }
            Err(invalid(
                &root,
                "a structural tag needs a \"format\" (or the legacy \"structures\" and \"triggers\")",
            ))
        }
        // SGLang passes the legacy shape without its `type`.
        None if obj.contains_key("structures") && obj.contains_key("triggers") => {
            legacy(obj, &root)
        }
        _ => format(value, &root),
    }
}

/// The legacy shape: `structures` of `{begin, schema, end}` and `triggers`,
/// read as one `triggered_tags` (XGrammar's `from_legacy_structural_tag`).
fn legacy(obj: &Map<String, Value>, at: &Pointer) -> Result<Format, TagError> {
    let sat = at.push("structures");
    let structures = array(obj.get("structures"), &sat, "structures")?;
    let mut tags = Vec::with_capacity(structures.len());
    for (i, s) in structures.iter().enumerate() {
        let p = sat.push_index(i);
        let Value::Object(s) = s else {
            return Err(invalid(&p, "a structure must be an object"));
        };
        let begin = string(s.get("begin"), &p.push("begin"), "begin")?;
        let end = string(s.get("end"), &p.push("end"), "end")?;
        let sp = p.push("schema");
        let schema = match s.get("schema") {
            Some(Value::String(text)) => serde_json::from_str(text)
                .map_err(|e| invalid(&sp, &format!("the schema text is not JSON: {e}")))?,
            Some(v @ (Value::Object(_) | Value::Bool(_))) => v.clone(),
            _ => {
                return Err(invalid(
                    &sp,
                    "a structure needs a \"schema\" (an object or JSON text)",
                ))
            }
        };
        tags.push(Tag {
            at: p.clone(),
            begin: TokenRef::Text(begin),
            content: Box::new(Format::JsonSchema {
                at: sp,
                schema,
                style: "json".into(),
                any_order: false,
            }),
            ends: vec![end],
            end_token: None,
        });
    }
    let triggers = strings(obj.get("triggers"), &at.push("triggers"), "triggers")?;
    Ok(Format::TriggeredTags {
        at: at.clone(),
        triggers,
        tags,
        at_least_one: false,
        stop_after_first: false,
        excludes: Vec::new(),
    })
}

/// The kinds tried, in order, for a format object without `type`.
const INFERRED: &[&str] = &[
    "tag",
    "const_string",
    "json_schema",
    "any_text",
    "sequence",
    "or",
    "triggered_tags",
    "tags_with_separator",
    "optional",
    "plus",
    "star",
    "repeat",
    "dispatch",
];

/// One format object at `at`.
pub fn format(value: &Value, at: &Pointer) -> Result<Format, TagError> {
    let Value::Object(obj) = value else {
        return Err(invalid(at, "a format must be a JSON object"));
    };
    match obj.get("type") {
        Some(Value::String(t)) => typed(t, obj, at),
        Some(_) => Err(invalid(
            &at.push("type"),
            "a format's \"type\" must be a string",
        )),
        None => {
            for t in INFERRED {
                if let Ok(f) = typed(t, obj, at) {
                    return Ok(f);
                }
            }
            Err(invalid(
                at,
                "a format without \"type\" must have the fields of one format kind",
            ))
        }
    }
}

fn typed(kind: &str, obj: &Map<String, Value>, at: &Pointer) -> Result<Format, TagError> {
    let field = |name: &str| obj.get(name);
    let p = |name: &str| at.push(name);
    Ok(match kind {
        "const_string" => Format::Const {
            at: at.clone(),
            value: string(field("value"), &p("value"), "value")?,
        },
        "json_schema" | "qwen_xml_parameter" => {
            let jp = p("json_schema");
            let schema = match field("json_schema") {
                Some(v @ (Value::Object(_) | Value::Bool(_))) => v.clone(),
                _ => {
                    return Err(invalid(
                        &jp,
                        "\"json_schema\" must be an object or a boolean",
                    ))
                }
            };
            let style = match (kind, field("style")) {
                ("qwen_xml_parameter", _) => "qwen_xml".to_string(),
                (_, None | Some(Value::Null)) => "json".to_string(),
                (_, Some(Value::String(s))) => s.clone(),
                _ => return Err(invalid(&p("style"), "\"style\" must be a string")),
            };
            let any_order = boolean(field("any_order"), &p("any_order"), "any_order")?;
            if let Some(v) = field("excludes") {
                if !strings(Some(v), &p("excludes"), "excludes")?.is_empty() {
                    return Err(TagError::Unsupported {
                        pointer: p("excludes"),
                        construct: "json_schema excludes".into(),
                        reason:
                            "substrings forbidden inside JSON string values are not enforced yet"
                                .into(),
                    });
                }
            }
            if !matches!(field("max_whitespace_cnt"), None | Some(Value::Null)) {
                return Err(TagError::Unsupported {
                    pointer: p("max_whitespace_cnt"),
                    construct: "json_schema max_whitespace_cnt".into(),
                    reason: "the whitespace bound is set by the compile options".into(),
                });
            }
            Format::JsonSchema {
                at: at.clone(),
                schema,
                style,
                any_order,
            }
        }
        "grammar" => Format::Grammar {
            at: at.clone(),
            text: nonempty(field("grammar"), &p("grammar"), "grammar")?,
        },
        "regex" => Format::Regex {
            at: at.clone(),
            pattern: string(field("pattern"), &p("pattern"), "pattern")?,
        },
        "any_text" => {
            if obj.is_empty() {
                return Err(invalid(at, "an empty object is not a format"));
            }
            Format::AnyText {
                at: at.clone(),
                excludes: excludes(field("excludes"), &p("excludes"))?,
                max_chars: budget(field("max_chars"), &p("max_chars"), "max_chars")?,
                max_tokens: budget(field("max_tokens"), &p("max_tokens"), "max_tokens")?,
            }
        }
        "sequence" | "or" => {
            let ep = p("elements");
            let elements = array(field("elements"), &ep, "elements")?;
            if elements.is_empty() {
                return Err(invalid(
                    &ep,
                    &format!("a {kind} needs at least one element"),
                ));
            }
            let elements = elements
                .iter()
                .enumerate()
                .map(|(i, e)| format(e, &ep.push_index(i)))
                .collect::<Result<Vec<_>, _>>()?;
            if kind == "or" {
                Format::Or {
                    at: at.clone(),
                    elements,
                }
            } else {
                Format::Sequence {
                    at: at.clone(),
                    elements,
                }
            }
        }
        "optional" | "plus" | "star" => {
            let content = content(field("content"), &p("content"))?;
            let (min, max) = match kind {
                "optional" => (0, Some(1)),
                "plus" => (1, None),
                _ => (0, None),
            };
            Format::Repeat {
                at: at.clone(),
                content,
                min,
                max,
            }
        }
        "repeat" => {
            let min = integer(field("min"), &p("min"), "min")?;
            let max = integer(field("max"), &p("max"), "max")?;
            if min < 0 {
                return Err(invalid(&p("min"), "\"min\" must be non-negative"));
            }
            let max = match max {
                -1 => None,
                m if m < min => {
                    return Err(invalid(&p("max"), "\"max\" must be -1 or at least \"min\""))
                }
                m => {
                    Some(u32::try_from(m).map_err(|_| invalid(&p("max"), "\"max\" is too large"))?)
                }
            };
            Format::Repeat {
                at: at.clone(),
                content: content(field("content"), &p("content"))?,
                min: u32::try_from(min).map_err(|_| invalid(&p("min"), "\"min\" is too large"))?,
                max,
            }
        }
        "tag" => Format::Tag(tag_fields(obj, at)?),
        "triggered_tags" => {
            let triggers = strings(field("triggers"), &p("triggers"), "triggers")?;
            if triggers.is_empty() {
                return Err(invalid(&p("triggers"), "\"triggers\" must not be empty"));
            }
            if let Some(i) = triggers.iter().position(String::is_empty) {
                return Err(invalid(
                    &p("triggers").push_index(i),
                    "a trigger must not be empty",
                ));
            }
            Format::TriggeredTags {
                at: at.clone(),
                triggers,
                tags: tag_list(field("tags"), &p("tags"))?,
                at_least_one: boolean(field("at_least_one"), &p("at_least_one"), "at_least_one")?,
                stop_after_first: boolean(
                    field("stop_after_first"),
                    &p("stop_after_first"),
                    "stop_after_first",
                )?,
                excludes: excludes(field("excludes"), &p("excludes"))?,
            }
        }
        "tags_with_separator" => Format::TagsWithSeparator {
            at: at.clone(),
            tags: tag_list(field("tags"), &p("tags"))?,
            separator: string(field("separator"), &p("separator"), "separator")?,
            at_least_one: boolean(field("at_least_one"), &p("at_least_one"), "at_least_one")?,
            stop_after_first: boolean(
                field("stop_after_first"),
                &p("stop_after_first"),
                "stop_after_first",
            )?,
        },
        "dispatch" => {
            let out = rules(field("rules"), &p("rules"), "pattern", |v, at| {
                nonempty(Some(v), at, "pattern")
            })?;
            let looped = match field("loop") {
                None => true,
                v => boolean(v, &p("loop"), "loop")?,
            };
            Format::Dispatch {
                at: at.clone(),
                rules: out,
                looped,
                excludes: excludes(field("excludes"), &p("excludes"))?,
            }
        }
        "token" => Format::Token {
            at: at.clone(),
            token: token(field("token"), &p("token"))?,
        },
        "exclude_token" => {
            tokens(field("exclude_tokens"), &p("exclude_tokens"))?;
            Format::ExcludeToken { at: at.clone() }
        }
        "any_tokens" => Format::AnyTokens {
            at: at.clone(),
            exclude: tokens(field("exclude_tokens"), &p("exclude_tokens"))?,
            max_tokens: budget(field("max_tokens"), &p("max_tokens"), "max_tokens")?,
        },
        "token_triggered_tags" => {
            let tp = p("trigger_tokens");
            let triggers = tokens(field("trigger_tokens"), &tp)?;
            if triggers.is_empty() {
                return Err(invalid(&tp, "\"trigger_tokens\" must not be empty"));
            }
            Format::TokenTriggeredTags {
                at: at.clone(),
                triggers,
                tags: tag_list(field("tags"), &p("tags"))?,
                exclude: tokens(field("exclude_tokens"), &p("exclude_tokens"))?,
                at_least_one: boolean(field("at_least_one"), &p("at_least_one"), "at_least_one")?,
                stop_after_first: boolean(
                    field("stop_after_first"),
                    &p("stop_after_first"),
                    "stop_after_first",
                )?,
            }
        }
        "token_dispatch" => {
            let out = rules(field("rules"), &p("rules"), "token", |v, at| {
                token(Some(v), at).map(|t| (at.clone(), t))
            })?;
            let looped = match field("loop") {
                None => true,
                v => boolean(v, &p("loop"), "loop")?,
            };
            Format::TokenDispatch {
                at: at.clone(),
                rules: out,
                looped,
                exclude: tokens(field("exclude_tokens"), &p("exclude_tokens"))?,
            }
        }
        other => {
            return Err(invalid(
                &p("type"),
                &format!("unknown format type {other:?}"),
            ))
        }
    })
}

fn tag_fields(obj: &Map<String, Value>, at: &Pointer) -> Result<Tag, TagError> {
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) if t == "tag" => {}
        Some(_) => {
            return Err(invalid(
                &at.push("type"),
                "a tag's \"type\" must be \"tag\"",
            ))
        }
    }
    let bp = at.push("begin");
    let begin = match obj.get("begin") {
        Some(Value::String(s)) => TokenRef::Text(s.clone()),
        Some(Value::Object(o)) => TokenRef::Token(token_object(o, &bp)?),
        _ => return Err(invalid(&bp, "a tag's \"begin\" must be a string")),
    };
    let ep = at.push("end");
    let mut end_token = None;
    let ends = match obj.get("end") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => {
            if a.is_empty() {
                return Err(invalid(&ep, "a tag's \"end\" list must not be empty"));
            }
            strings(obj.get("end"), &ep, "end")?
        }
        Some(Value::Object(o)) => {
            end_token = Some((ep.clone(), token_object(o, &ep)?));
            Vec::new()
        }
        _ => {
            return Err(invalid(
                &ep,
                "a tag's \"end\" must be a string or a list of strings",
            ))
        }
    };
    Ok(Tag {
        at: at.clone(),
        begin,
        content: content(obj.get("content"), &at.push("content"))?,
        ends,
        end_token,
    })
}

fn tag_list(v: Option<&Value>, at: &Pointer) -> Result<Vec<Tag>, TagError> {
    let items = array(v, at, "tags")?;
    if items.is_empty() {
        return Err(invalid(at, "\"tags\" must not be empty"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let p = at.push_index(i);
            match t {
                Value::Object(o) => tag_fields(o, &p),
                _ => Err(invalid(&p, "a tag must be an object")),
            }
        })
        .collect()
}

fn content(v: Option<&Value>, at: &Pointer) -> Result<Box<Format>, TagError> {
    match v {
        Some(v) => Ok(Box::new(format(v, at)?)),
        None => Err(invalid(at, "a \"content\" format is required")),
    }
}

fn token(v: Option<&Value>, at: &Pointer) -> Result<TokenName, TagError> {
    match v {
        Some(Value::Number(n)) => match n.as_u64().and_then(|i| u32::try_from(i).ok()) {
            Some(i) => Ok(TokenName::Id(i)),
            None => Err(invalid(
                at,
                "a token id must be a non-negative 32-bit integer",
            )),
        },
        Some(Value::String(s)) if !s.is_empty() => Ok(TokenName::Text(s.clone())),
        _ => Err(invalid(
            at,
            "a token must be a non-negative id or a non-empty string",
        )),
    }
}

/// `dispatch` / `token_dispatch` rules: non-empty `[pattern, format]`
/// pairs, each pattern read by `pattern` (`what` names it in errors).
fn rules<P>(
    v: Option<&Value>,
    at: &Pointer,
    what: &str,
    pattern: impl Fn(&Value, &Pointer) -> Result<P, TagError>,
) -> Result<Vec<(P, Format)>, TagError> {
    let rules = array(v, at, "rules")?;
    if rules.is_empty() {
        return Err(invalid(at, "\"rules\" must not be empty"));
    }
    let mut out = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        let ip = at.push_index(i);
        let pair = match r {
            Value::Array(a) if a.len() == 2 => a,
            _ => {
                return Err(invalid(
                    &ip,
                    &format!("a rule must be a [{what}, format] pair"),
                ))
            }
        };
        let first = pattern(&pair[0], &ip.push_index(0))?;
        out.push((first, format(&pair[1], &ip.push_index(1))?));
    }
    Ok(out)
}

/// A list of tokens (absent: empty), each with its pointer.
fn tokens(v: Option<&Value>, at: &Pointer) -> Result<Vec<(Pointer, TokenName)>, TagError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let Value::Array(a) = v else {
        return Err(invalid(at, "a list of tokens must be an array"));
    };
    a.iter()
        .enumerate()
        .map(|(i, t)| {
            let p = at.push_index(i);
            token(Some(t), &p).map(|t| (p, t))
        })
        .collect()
}

/// A token format object (`{"type": "token", "token": ...}`) as a tag's
/// begin or end.
fn token_object(obj: &Map<String, Value>, at: &Pointer) -> Result<TokenName, TagError> {
    match obj.get("type") {
        Some(Value::String(t)) if t == "token" => token(obj.get("token"), &at.push("token")),
        _ => Err(invalid(
            &at.push("type"),
            "a token begin or end is {\"type\": \"token\", \"token\": ...}",
        )),
    }
}

pub(super) fn invalid(at: &Pointer, message: &str) -> TagError {
    TagError::Invalid {
        pointer: at.clone(),
        message: message.to_string(),
    }
}

fn string(v: Option<&Value>, at: &Pointer, name: &str) -> Result<String, TagError> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(invalid(at, &format!("\"{name}\" must be a string"))),
    }
}

fn nonempty(v: Option<&Value>, at: &Pointer, name: &str) -> Result<String, TagError> {
    match string(v, at, name)? {
        s if s.is_empty() => Err(invalid(at, &format!("\"{name}\" must not be empty"))),
        s => Ok(s),
    }
}

fn boolean(v: Option<&Value>, at: &Pointer, name: &str) -> Result<bool, TagError> {
    match v {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        _ => Err(invalid(at, &format!("\"{name}\" must be a boolean"))),
    }
}

fn integer(v: Option<&Value>, at: &Pointer, name: &str) -> Result<i64, TagError> {
    match v.and_then(Value::as_i64) {
        Some(n) => Ok(n),
        None => Err(invalid(at, &format!("\"{name}\" must be an integer"))),
    }
}

fn budget(v: Option<&Value>, at: &Pointer, name: &str) -> Result<Option<u32>, TagError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(x) if x <= i32::MAX as u64 => Ok(Some(x as u32)),
            _ => Err(invalid(
                at,
                &format!("\"{name}\" must be an integer from 0 to 2147483647"),
            )),
        },
        _ => Err(invalid(
            at,
            &format!("\"{name}\" must be an integer or null"),
        )),
    }
}

fn array<'v>(v: Option<&'v Value>, at: &Pointer, name: &str) -> Result<&'v Vec<Value>, TagError> {
    match v {
        Some(Value::Array(a)) => Ok(a),
        _ => Err(invalid(at, &format!("\"{name}\" must be an array"))),
    }
}

fn strings(v: Option<&Value>, at: &Pointer, name: &str) -> Result<Vec<String>, TagError> {
    array(v, at, name)?
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Value::String(s) => Ok(s.clone()),
            _ => Err(invalid(
                &at.push_index(i),
                &format!("\"{name}\" must hold only strings"),
            )),
        })
        .collect()
}

/// An `excludes` list: absent is empty; each entry a non-empty string.
fn excludes(v: Option<&Value>, at: &Pointer) -> Result<Vec<String>, TagError> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let list = strings(Some(v), at, "excludes")?;
    if let Some(i) = list.iter().position(String::is_empty) {
        return Err(invalid(
            &at.push_index(i),
            "an excluded string must not be empty",
        ));
    }
    Ok(list)
}

//! llguidance's grammar list (`TopLevelGrammar`):
//! `{"grammars": [{"name": "main", "lark_grammar": "..."}, {"name": "sub",
//! "json_schema": {...}}]}`. The first grammar is the output's; a Lark
//! grammar refers to another one of the list by name, `@sub`, used where it
//! is written as llguidance uses it: a Lark grammar as a `%lark { ... }`
//! block of that text, a JSON Schema as a `%json { ... }` block.
//!
//! Every field but `name`, `lark_grammar` and `json_schema` (and a `null`
//! `max_tokens`) is refused by name: the older node-list form and a token
//! limit on the whole output are not compiled.

use super::ast::*;
use super::LarkError;
use serde_json::Value as Json;

/// One grammar of the list.
#[derive(Clone, Debug, PartialEq)]
pub enum SubBody {
    /// `lark_grammar`, parsed.
    Lark(Vec<Item>),
    /// `json_schema`.
    Json(Json),
}

/// A named grammar of the list.
#[derive(Clone, Debug, PartialEq)]
pub struct SubGrammar {
    pub name: String,
    pub body: SubBody,
}

/// The list read: the first grammar's items (a JSON Schema first is
/// `start: %json {...}`), its name, and every named grammar.
#[derive(Clone, Debug, PartialEq)]
pub struct TopLevel {
    pub main: Vec<Item>,
    pub main_name: String,
    pub subs: Vec<SubGrammar>,
}

const START: Pos = Pos { line: 1, column: 1 };

fn err(message: String) -> LarkError {
    LarkError::Syntax {
        line: START.line,
        column: START.column,
        message,
    }
}

/// Whether `text` is a grammar list rather than Lark text: a JSON object
/// (a Lark grammar never begins with `{`).
pub fn is_grammar_list(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// Reads the list; a grammar's Lark text that does not parse is an error
/// in that grammar (its own line and column).
pub fn parse(text: &str) -> Result<TopLevel, LarkError> {
    let v: Json = serde_json::from_str(text).map_err(|e| LarkError::Syntax {
        line: e.line().max(1),
        column: e.column().max(1),
        message: format!("the grammar list is not JSON: {e}"),
    })?;
    let Some(obj) = v.as_object() else {
        return Err(err("the grammar list must be a JSON object".into()));
    };
    for (k, val) in obj {
        match k.as_str() {
            "grammars" => {}
            "max_tokens" if val.is_null() => {}
            "max_tokens" => {
                return Err(LarkError::Unsupported {
                    construct: "`max_tokens` of the grammar list".into(),
                    line: START.line,
                    column: START.column,
                    reason: "it ends the output after so many tokens, wherever it stands; \
                             constrain compiles a text language"
                        .into(),
                })
            }
            _ => return Err(err(format!("unknown field `{k}` in the grammar list"))),
        }
    }
    let Some(list) = obj.get("grammars").and_then(Json::as_array) else {
        return Err(err("the grammar list needs a `grammars` array".into()));
    };
    if list.is_empty() {
        return Err(err("the `grammars` array is empty".into()));
    }
    let mut subs: Vec<SubGrammar> = Vec::new();
    let mut main = None;
    for (i, g) in list.iter().enumerate() {
        let at = format!("grammars[{i}]");
        let Some(g) = g.as_object() else {
            return Err(err(format!("{at} must be a JSON object")));
        };
        let mut name = None;
        let mut body = None;
        for (k, val) in g {
            let set = |body: &mut Option<SubBody>, b: SubBody| {
                if body.replace(b).is_some() {
                    return Err(err(format!(
                        "{at} has both `lark_grammar` and `json_schema`"
                    )));
                }
                Ok(())
            };
            match (k.as_str(), val) {
                ("name", Json::Null) => {}
                ("name", Json::String(n)) => name = Some(n.clone()),
                ("name", _) => return Err(err(format!("{at}: `name` must be a string"))),
                ("lark_grammar", Json::Null) | ("json_schema", Json::Null) => {}
                ("lark_grammar", Json::String(t)) => {
                    let label = name.clone().unwrap_or_else(|| at.clone());
                    let items = super::lex::lex(t)
                        .and_then(super::parse::parse)
                        .map_err(|e| e.in_grammar(&label))?;
                    set(&mut body, SubBody::Lark(items))?;
                }
                ("lark_grammar", _) => {
                    return Err(err(format!("{at}: `lark_grammar` must be a string")))
                }
                ("json_schema", s) => set(&mut body, SubBody::Json(s.clone()))?,
                (k, _) => {
                    return Err(LarkError::Unsupported {
                        construct: format!("field `{k}` of {at}"),
                        line: START.line,
                        column: START.column,
                        reason: "a grammar of the list is `lark_grammar` or `json_schema`, \
                                 with an optional `name`"
                            .into(),
                    })
                }
            }
        }
        let Some(body) = body else {
            return Err(err(format!(
                "{at} must have either `lark_grammar` or `json_schema`"
            )));
        };
        if let Some(n) = &name {
            if subs.iter().any(|s| &s.name == n) {
                return Err(err(format!("duplicate grammar name `{n}` ({at})")));
            }
        }
        if i == 0 {
            main = Some((name.clone().unwrap_or_else(|| at.clone()), body.clone()));
        }
        if let Some(name) = name {
            subs.push(SubGrammar { name, body });
        }
    }
    let (main_name, body) = main.expect("a first grammar");
    let main = match body {
        SubBody::Lark(items) => items,
        SubBody::Json(schema) => vec![Item::Def(Def {
            name: "start".into(),
            pos: START,
            terminal: false,
            parametric: false,
            options: Options::default(),
            body: Expansions {
                pos: START,
                alts: vec![Alias {
                    conjuncts: vec![Expansion(vec![Expr {
                        atom: Atom::Value(Value::Json(schema), START),
                        repeat: None,
                        pos: START,
                    }])],
                    and_pos: None,
                    cond: None,
                }],
            },
        })],
    };
    Ok(TopLevel {
        main,
        main_name,
        subs,
    })
}

//! Scans of the parsed items that the lowering reads before it lowers
//! anything: whether a rule body reads its parameter, whether any rule sets
//! `temperature`, the canonical text of `%ignore` items (llguidance merges
//! two grammars' lexeme classes when these agree) and the `%llguidance`
//! options accepted, and the `"x-guidance"` options of a `%json` block.

use super::ast::*;
use super::parse::unsupported;
use super::LarkError;
use std::collections::HashMap;

/// Deepest chain of rules or terminals lowered inside one another (a
/// bound on the recursion of the lowering over the untrusted text).
pub const MAX_DEPTH: usize = 500;

/// One grammar's definitions by name.
pub(super) struct Defs<'a> {
    pub rules: HashMap<&'a str, &'a Def>,
    pub terminals: HashMap<&'a str, &'a Def>,
    pub imported: HashMap<String, (&'static str, Pos)>,
}

/// Whether a rule body reads its parameter (a condition other than
/// `true`, or a reference passing a value computed from it), as
/// llguidance's `needs_param`.
pub(super) fn needs_param(e: &Expansions) -> bool {
    fn atom(a: &Atom) -> bool {
        match a {
            Atom::Group(e) | Atom::Maybe(e) => needs_param(e),
            Atom::Not(a, _) => atom(a),
            Atom::Value(Value::NameParam(_, x), _) => x.needs_param(),
            Atom::Value(..) => false,
        }
    }
    e.alts.iter().any(|a| {
        a.cond.as_ref().is_some_and(|(c, _)| *c != ParamCond::True)
            || a.conjuncts.iter().flat_map(|c| &c.0).any(|x| atom(&x.atom))
    })
}

/// Whether a rule of the items (or of a `%lark` block in them) sets
/// `temperature`.
pub(super) fn any_temperature(items: &[Item]) -> bool {
    fn exps(e: &Expansions) -> bool {
        e.alts
            .iter()
            .flat_map(|a| &a.conjuncts)
            .flat_map(|c| &c.0)
            .any(|x| atom(&x.atom))
    }
    fn atom(a: &Atom) -> bool {
        match a {
            Atom::Group(e) | Atom::Maybe(e) => exps(e),
            Atom::Not(a, _) => atom(a),
            Atom::Value(Value::NestedLark(items), _) => any_temperature(items),
            Atom::Value(..) => false,
        }
    }
    items.iter().any(|i| match i {
        Item::Def(d) => d.options.temperature || exps(&d.body),
        _ => false,
    })
}

/// A canonical text of `%ignore` items with every name expanded: equal
/// texts are the same regex to llguidance. `None` past a size bound.
pub(super) fn ignore_key(defs: &Defs, items: &[&Expansions]) -> Option<String> {
    const MAX_KEY: usize = 1 << 16;
    fn exps(defs: &Defs, e: &Expansions, out: &mut String, depth: usize) -> Option<()> {
        if out.len() > MAX_KEY || depth > MAX_DEPTH {
            return None;
        }
        // One item alone is that item (llguidance's regexes are
        // hash-consed: a concatenation or a union of one is its operand).
        if let [Alias {
            conjuncts,
            cond: None,
            ..
        }] = e.alts.as_slice()
        {
            if let [Expansion(x)] = conjuncts.as_slice() {
                if let [Expr {
                    atom, repeat: None, ..
                }] = x.as_slice()
                {
                    return atom_key(defs, atom, out, depth + 1);
                }
            }
        }
        out.push('(');
        for a in &e.alts {
            out.push('|');
            for c in &a.conjuncts {
                out.push('&');
                for x in &c.0 {
                    atom_key(defs, &x.atom, out, depth)?;
                    out.push_str(&format!("{:?} ", x.repeat));
                }
            }
        }
        out.push(')');
        Some(())
    }
    fn atom_key(defs: &Defs, a: &Atom, out: &mut String, depth: usize) -> Option<()> {
        match a {
            Atom::Group(e) => exps(defs, e, out, depth + 1),
            Atom::Maybe(e) => {
                out.push('?');
                exps(defs, e, out, depth + 1)
            }
            Atom::Not(a, _) => {
                out.push('~');
                atom_key(defs, a, out, depth + 1)
            }
            Atom::Value(Value::Name(n), _) => {
                if let Some(d) = defs.terminals.get(n.as_str()) {
                    exps(defs, &d.body, out, depth + 1)
                } else if let Some((re, _)) = defs.imported.get(n) {
                    out.push_str(&format!("/{re}/"));
                    Some(())
                } else {
                    None
                }
            }
            Atom::Value(v, _) => {
                out.push_str(&format!("{v:?}"));
                Some(())
            }
        }
    }
    let mut out = String::new();
    for e in items {
        exps(defs, e, &mut out, 0)?;
        out.push('\n');
    }
    Some(out)
}

/// `%llguidance {...}`: options that change no language are accepted; the
/// rest are refused by name.
pub(super) fn check_llguidance(v: &serde_json::Value, pos: Pos) -> Result<(), LarkError> {
    let Some(obj) = v.as_object() else {
        return Err(LarkError::Syntax {
            line: pos.line,
            column: pos.column,
            message: "%llguidance takes a JSON object".into(),
        });
    };
    for (k, val) in obj {
        if !val.is_boolean() {
            return Err(LarkError::Syntax {
                line: pos.line,
                column: pos.column,
                message: format!("%llguidance option `{k}` takes true or false"),
            });
        }
        let harmless = matches!(
            k.as_str(),
            "no_forcing" | "allow_initial_skip" | "allow_invalid_utf8" | "ignore_once"
        ) && val == &serde_json::Value::Bool(false)
            || k == "no_forcing";
        if !harmless {
            return Err(unsupported(
                pos,
                &format!("%llguidance option `{k}`"),
                "only `no_forcing` (no effect on the language) and options left false are accepted",
            ));
        }
    }
    Ok(())
}

/// The options of a `%json` block's top-level `"x-guidance"` object
/// (llguidance's `JsonCompileOptions`) as constrain enforces them. The
/// block's text is always compact JSON with the canonical escapes, so an
/// option is accepted where every such text is also in llguidance's
/// language (flexible whitespace, general `\u` escapes, `coerce_one_of`,
/// separators and whitespace patterns that match the compact spelling);
/// `lenient` is constrain's lenient mode. The rest is refused by name.
pub(super) fn x_guidance(
    schema: &serde_json::Value,
    base: &crate::schema::SchemaOptions,
    pos: Pos,
) -> Result<crate::schema::SchemaOptions, LarkError> {
    use serde_json::Value as J;
    let mut opts = base.clone();
    let Some(x) = schema.get("x-guidance") else {
        return Ok(opts);
    };
    let Some(obj) = x.as_object() else {
        return Err(unsupported(
            pos,
            "%json \"x-guidance\"",
            "it must be an object",
        ));
    };
    let matches = |pattern: &str, text: &str| {
        regex_automata::meta::Regex::new(&format!("^(?:{pattern})$"))
            .is_ok_and(|r| r.is_match(text))
    };
    for (k, v) in obj {
        let bad = |why: &str| unsupported(pos, &format!("%json \"x-guidance\" option `{k}`"), why);
        match (k.as_str(), v) {
            ("whitespace_flexible" | "coerce_one_of", J::Bool(_)) => {}
            ("json_allow_general_unicode_escapes", J::Bool(b)) => opts.general_unicode_escapes = *b,
            ("lenient", J::Bool(b)) => opts.lenient = *b,
            ("item_separator", J::String(r)) if matches(r, ",") => {}
            ("key_separator", J::String(r)) if matches(r, ":") => {}
            ("whitespace_pattern", J::Null) => {}
            ("whitespace_pattern", J::String(r)) if matches(r, "") => {}
            ("json_allowed_escapes", J::Null) => {}
            ("json_allowed_escapes", J::String(e)) => {
                opts.allowed_escapes = crate::schema::Escapes::parse(e).map_err(|c| {
                    bad(&format!(
                        "`{c}` is not an escape letter (one of `nrbtf\\\"u`)"
                    ))
                })?
            }
            ("item_separator" | "key_separator" | "whitespace_pattern", _) => {
                return Err(bad(
                    "the block is written as compact JSON, which this pattern does not match",
                ))
            }
            _ => return Err(bad("unknown option, or a value of the wrong type")),
        }
    }
    Ok(opts)
}

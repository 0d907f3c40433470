//! # Cohere's nested XML arguments: the `cohere_xml` style
//!
//! Cohere's tool calls write every value as an element that names its kind,
//! and nest: `<cofl:value name="KEY" type="raw|json|dict|list">VALUE</cofl:value>`.
//! The language is the one XGrammar 0.2.8's grammar for the style describes:
//!
//! * an object's properties in schema order (in any order under
//!   `any_order`), each with JSON whitespace before it and after the last;
//! * a plain string is `type="raw"` followed by any text up to
//!   `</cofl:value>`; a string `const` / `enum` is `type="raw"` with its raw
//!   text between JSON whitespace;
//! * an object is `type="dict"`, its body the same elements one level down;
//! * an array is `type="list"`, its items elements without a name and with
//!   no whitespace between them (`prefixItems`, then `items` as many times
//!   as `minItems` / `maxItems` allow);
//! * anything else is `type="json"`: the value's JSON between whitespace;
//! * `anyOf`, `oneOf`, a type list, an `allOf` of one schema and an `enum`
//!   of mixed kinds are a choice of elements, one per branch, each with its
//!   own `type`.
//!
//! What does not lower exactly is refused by name, as in the flat styles: a
//! string with constraints, an untyped value, an object open to undeclared
//! properties, an array without an item schema or with other constraints,
//! and recursion.

use super::text::Texts;
use super::xml::{
    follow_ref, json, members, only, sequence, whitespace, Refusal, ANNOTATIONS, MAX_DEPTH,
};
use super::TagError;
use crate::schema::{Pointer, SchemaOptions, SchemaWarning};
use serde_json::{Map, Value};

const OPEN: &str = "<cofl:value";
const CLOSE: &str = "</cofl:value>";

/// Lowers the arguments object `schema` to regex text (`None`: no text).
pub(super) fn lower(
    schema: &Value,
    at: &Pointer,
    opts: &SchemaOptions,
    texts: &Texts<'_>,
    warnings: &mut Vec<SchemaWarning>,
) -> Result<Option<String>, TagError> {
    let ws = whitespace(opts);
    let sp = at.push("json_schema");
    let Some(root) = schema.as_object() else {
        return Err(refusal(
            sp,
            "the arguments schema must be an object schema".into(),
        ));
    };
    let mut c = Cohere {
        root,
        opts,
        texts,
        warnings,
        ws,
        free: None,
    };
    c.body(root, &sp, 0).map_err(|(p, why)| refusal(p, why))
}

fn refusal(pointer: Pointer, reason: String) -> TagError {
    TagError::Unsupported {
        pointer,
        construct: "json_schema style \"cohere_xml\"".into(),
        reason,
    }
}

struct Cohere<'a, 'b> {
    root: &'a Map<String, Value>,
    opts: &'a SchemaOptions,
    texts: &'a Texts<'b>,
    warnings: &'a mut Vec<SchemaWarning>,
    /// JSON whitespace, bounded per slot.
    ws: String,
    /// Raw text up to the closing marker, made once.
    free: Option<Option<String>>,
}

/// What a value's element is: its `type` attribute and its body.
enum Kind {
    /// Any raw text up to the closing marker.
    Raw,
    /// Raw literal text (regex), between whitespace.
    RawLiteral(String),
    /// JSON (regex), between whitespace.
    Json(String),
    /// Elements (regex), between whitespace.
    Dict(String),
    List(String),
}

impl Cohere<'_, '_> {
    /// An object's body: its property elements, then whitespace.
    fn body(
        &mut self,
        obj: &Map<String, Value>,
        at: &Pointer,
        depth: usize,
    ) -> Result<Option<String>, Refusal> {
        let (props, required) = members(obj, at)?;
        let ws = self.ws.clone();
        let mut elements: Vec<(String, bool)> = Vec::new();
        for (key, sub) in props {
            let pp = at.push("properties").push(key);
            let is_required = required.contains(&key.as_str());
            match self.element(Some(key), sub, &pp, depth + 1)? {
                Some(e) => elements.push((format!("{ws}{e}"), is_required)),
                None if is_required => return Ok(None),
                None => {}
            }
        }
        let mut out = sequence(&elements, self.opts, at)?;
        out.push_str(&ws);
        Ok(Some(out))
    }

    /// One value's element (`name`: a property's key; `None`: an array
    /// item), or the choice of elements of its branches.
    fn element(
        &mut self,
        name: Option<&str>,
        s: &Value,
        at: &Pointer,
        depth: usize,
    ) -> Result<Option<String>, Refusal> {
        if depth > MAX_DEPTH {
            return Err((at.clone(), "values nest too deeply (or recursively)".into()));
        }
        let Some(o) = s.as_object() else {
            return Err((
                at.clone(),
                "a boolean schema (any value) is not supported".into(),
            ));
        };
        let only = |keys: &[&str]| only(o, keys);
        if let Some(r) = o.get("$ref").and_then(Value::as_str) {
            if !only(&["$ref"]) {
                return Err((at.clone(), "\"$ref\" beside other keywords".into()));
            }
            let t = follow_ref(r, self.root, at)?;
            return self.element(name, t, at, depth + 1);
        }
        // Branches: one element each.
        let mut branches: Vec<(Value, Pointer)> = Vec::new();
        for k in ["anyOf", "oneOf", "allOf"] {
            let Some(b) = o.get(k) else { continue };
            let (true, Some(bs)) = (only(&[k]), b.as_array()) else {
                return Err((at.clone(), format!("\"{k}\" beside other keywords")));
            };
            if k == "allOf" && bs.len() != 1 {
                return Err((at.push(k), "\"allOf\" of more than one schema".into()));
            }
            for (i, b) in bs.iter().enumerate() {
                branches.push((b.clone(), at.push(k).push_index(i)));
            }
        }
        if let Some(Value::Array(items)) = o.get("enum") {
            let strings = items.iter().filter(|v| v.is_string()).count();
            if strings != 0 && strings != items.len() {
                for (i, v) in items.iter().enumerate() {
                    let one = Value::Object(Map::from_iter([("const".into(), v.clone())]));
                    branches.push((one, at.push("enum").push_index(i)));
                }
            }
        }
        if let Some(Value::Array(ts)) = o.get("type") {
            for t in ts {
                let mut one = o.clone();
                one.insert("type".into(), t.clone());
                branches.push((Value::Object(one), at.push("type")));
            }
        }
        if !branches.is_empty() {
            let mut alts = Vec::new();
            for (b, p) in branches {
                alts.extend(self.element(name, &b, &p, depth + 1)?);
            }
            return Ok((!alts.is_empty()).then(|| format!("(?:{})", alts.join("|"))));
        }
        let Some(kind) = self.kind(o, at, depth)? else {
            return Ok(None);
        };
        let lit = regex_syntax::escape;
        let ws = &self.ws;
        let head = match name {
            Some(n) => format!("{} name=\"{}\" type=\"", lit(OPEN), lit(n)),
            None => format!("{} type=\"", lit(OPEN)),
        };
        let (ty, body) = match kind {
            Kind::Raw => {
                let free = self.raw_text(at)?;
                let Some(free) = free else { return Ok(None) };
                ("raw", free)
            }
            Kind::RawLiteral(r) => ("raw", format!("{ws}{r}{ws}")),
            Kind::Json(j) => ("json", format!("{ws}{j}{ws}")),
            Kind::Dict(d) => ("dict", format!("{ws}(?:{d}){ws}")),
            Kind::List(l) => ("list", format!("{ws}(?:{l}){ws}")),
        };
        Ok(Some(format!("{head}{ty}\">{body}{}", lit(CLOSE))))
    }

    /// The kind and body of a value with no branches.
    fn kind(
        &mut self,
        o: &Map<String, Value>,
        at: &Pointer,
        depth: usize,
    ) -> Result<Option<Kind>, Refusal> {
        let only = |keys: &[&str]| only(o, keys);
        let literals: Option<Vec<&Value>> = if let Some(v) = o.get("const") {
            if !only(&["const", "type"]) {
                return Err((at.clone(), "\"const\" beside other keywords".into()));
            }
            Some(vec![v])
        } else if let Some(e) = o.get("enum") {
            let (true, Some(items)) = (only(&["enum", "type"]), e.as_array()) else {
                return Err((at.clone(), "\"enum\" beside other keywords".into()));
            };
            Some(items.iter().collect())
        } else {
            None
        };
        if let Some(vs) = literals {
            // One kind for all (a mixed enum was split into branches).
            if vs.is_empty() {
                return Ok(None);
            }
            let texts: Vec<String> = vs
                .iter()
                .map(|v| match v {
                    Value::String(s) => regex_syntax::escape(s),
                    other => regex_syntax::escape(&other.to_string()),
                })
                .collect();
            let alt = format!("(?:{})", texts.join("|"));
            return Ok(Some(if vs[0].is_string() {
                Kind::RawLiteral(alt)
            } else {
                Kind::Json(alt)
            }));
        }
        match o.get("type").and_then(Value::as_str) {
            Some("string") => {
                if !only(&["type"]) {
                    return Err((
                        at.clone(),
                        "a string with constraints (its raw text would need them) is not supported"
                            .into(),
                    ));
                }
                Ok(Some(Kind::Raw))
            }
            Some("object") => Ok(self.body(o, at, depth)?.map(Kind::Dict)),
            Some("array") => Ok(self.list(o, at, depth)?.map(Kind::List)),
            Some(_) => {
                let j = json(
                    &Value::Object(o.clone()),
                    self.root,
                    at,
                    self.opts,
                    self.warnings,
                )?;
                Ok(Some(Kind::Json(j)))
            }
            None => Err((
                at.clone(),
                "a value without a type (any value) is not supported".into(),
            )),
        }
    }

    /// An array's items: unnamed elements, no whitespace between them.
    fn list(
        &mut self,
        o: &Map<String, Value>,
        at: &Pointer,
        depth: usize,
    ) -> Result<Option<String>, Refusal> {
        for k in o.keys() {
            let ok = matches!(
                k.as_str(),
                "type" | "items" | "prefixItems" | "minItems" | "maxItems"
            ) || ANNOTATIONS.contains(&k.as_str());
            if !ok {
                return Err((at.push(k), format!("the keyword {k:?} on an array")));
            }
        }
        let count = |k: &str| -> Result<Option<u64>, Refusal> {
            match o.get(k) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| (at.push(k), "not a non-negative integer".into())),
            }
        };
        let (min, max) = (count("minItems")?.unwrap_or(0), count("maxItems")?);
        let mut prefix = Vec::new();
        if let Some(p) = o.get("prefixItems") {
            let Some(ps) = p.as_array() else {
                return Err((at.push("prefixItems"), "not an array".into()));
            };
            for (i, s) in ps.iter().enumerate() {
                let pp = at.push("prefixItems").push_index(i);
                // Every prefix item is written (as XGrammar's grammar has it).
                match self.element(None, s, &pp, depth + 1)? {
                    Some(e) => prefix.push(e),
                    None => return Ok(None),
                }
            }
        }
        let rest = match o.get("items") {
            Some(Value::Bool(false)) => None,
            None if o.contains_key("prefixItems") => {
                return Err((
                    at.clone(),
                    "items after prefixItems with no schema (any value) are not supported".into(),
                ))
            }
            None | Some(Value::Bool(true)) => {
                return Err((
                    at.clone(),
                    "an array without an item schema (any value) is not supported".into(),
                ))
            }
            Some(s) => self.element(None, s, &at.push("items"), depth + 1)?,
        };
        let n = prefix.len() as u64;
        if max.is_some_and(|m| m < min) || (rest.is_none() && min > n) {
            return Ok(None);
        }
        if max.is_some_and(|m| m < n) {
            return Ok(None);
        }
        let mut out: String = prefix.iter().map(|e| format!("(?:{e})")).collect();
        if let Some(r) = rest {
            let lo = min.saturating_sub(n);
            let hi = max.map(|m| m - n);
            if hi.unwrap_or(lo) > self.opts.max_repeat {
                return Err((
                    at.clone(),
                    format!(
                        "an item count over the limit of {} (max_repeat)",
                        self.opts.max_repeat
                    ),
                ));
            }
            let rep = match hi {
                Some(h) => format!("{{{lo},{h}}}"),
                None => format!("{{{lo},}}"),
            };
            out.push_str(&format!("(?:{r}){rep}"));
        }
        Ok(Some(out))
    }

    /// Raw text up to the closing marker.
    fn raw_text(&mut self, at: &Pointer) -> Result<Option<String>, Refusal> {
        if self.free.is_none() {
            let f = self
                .texts
                .free(&[CLOSE.to_string()], None, at)
                .map_err(|e| (at.clone(), e.to_string()))?;
            self.free = Some(f);
        }
        Ok(self.free.clone().flatten())
    }
}

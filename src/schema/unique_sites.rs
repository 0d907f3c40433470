//! Where `uniqueItems` can be left to the matcher's run-time check
//! ([`crate::unique`]).
//!
//! The matcher knows an array only by its place in the output: the keys and
//! items that lead to it. It follows the schemas that apply there through a
//! graph of the schema ([`UniqueItems`]): one node per schema object, edges
//! for `properties`, `patternProperties` (a pattern the check can read: the
//! matcher matches each key it writes against it), `additionalProperties`
//! and `items`, and "applies here too" for `allOf`,
//! `$ref` and an `anyOf` / `oneOf` branch whose sibling branches admit no
//! array. A recursive `$ref` is a cycle. A schema reached only that way
//! applies to every value at its place that is an array, so its
//! `uniqueItems` is exact when checked there. A schema also reached through
//! anything else (an alternative that may be an array too, `if` / `then` /
//! `else`, `not`, a pattern with lookaround, tuple items, `contains`,
//! `dependentSchemas`, ...) may apply where the matcher cannot tell, and its
//! `uniqueItems` stays refused, with the reason. A `$dynamicRef` or
//! `$recursiveRef` anywhere leaves every array unchecked.

use super::ir::resources::Resources;
use super::pattern::KeyMatcher;
use crate::unique::UniqueItems;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Most schema objects one walk expands (past it nothing is checked).
const MAX_VISITS: usize = 100_000;

/// The arrays the matcher checks: their schemas' pointers and the graph of
/// their places.
#[derive(Debug)]
pub(crate) struct Sites {
    /// Pointers of the schemas whose `uniqueItems` is checked at run time.
    pub checked: HashSet<String>,
    /// Why the others are not.
    pub refused: HashMap<String, &'static str>,
    pub trie: UniqueItems,
}

/// The checked arrays of `root` (already bundled, as the generator reads
/// it).
pub(crate) fn sites(root: &Value) -> Sites {
    let resources = Resources::collect(root);
    let mut w = Walk {
        root,
        resources: &resources,
        trie: UniqueItems::new(),
        node_of: HashMap::new(),
        placed: HashSet::new(),
        unplaced: HashMap::new(),
        visits: 0,
        failed: false,
    };
    w.node_of.insert(String::new(), 0);
    w.placed(root, String::new());
    if w.failed {
        return Sites {
            checked: HashSet::new(),
            refused: HashMap::new(),
            trie: UniqueItems::new(),
        };
    }
    let mut trie = w.trie;
    trie.finish();
    // A schema the generator lowers (its own `uniqueItems` or one merged
    // into it through `$ref` / `allOf`) is checked when it is only ever
    // reached with a place, and a checked node applies wherever it does.
    let mut checked = HashSet::new();
    for (ptr, &n) in &w.node_of {
        if !w.unplaced.contains_key(ptr) && trie.closure_unique(n) {
            checked.insert(ptr.clone());
        }
    }
    Sites {
        checked,
        refused: w.unplaced,
        trie,
    }
}

struct Walk<'a> {
    root: &'a Value,
    resources: &'a Resources,
    trie: UniqueItems,
    /// The node of each schema object reached with a place.
    node_of: HashMap<String, u32>,
    /// Schemas expanded with a place.
    placed: HashSet<String>,
    /// Schemas reached without one, and why.
    unplaced: HashMap<String, &'static str>,
    visits: usize,
    failed: bool,
}

fn push(ptr: &str, token: &str) -> String {
    format!("{ptr}/{}", token.replace('~', "~0").replace('/', "~1"))
}

/// How a subschema relates to its parent's place.
enum Edge {
    /// Applies at the same place.
    Here,
    /// Applies at the place of a member with this key.
    Key(String),
    /// Applies at the keys a pattern matches.
    Pattern(Arc<KeyMatcher>),
    /// Applies at the undeclared keys no pattern matches (the parent's
    /// declared names).
    Other(Vec<String>),
    /// Applies at every item.
    Items,
    /// Applies where the matcher cannot tell.
    Lost(&'static str),
}

impl<'a> Walk<'a> {
    fn node(&mut self, ptr: &str) -> u32 {
        if let Some(&n) = self.node_of.get(ptr) {
            return n;
        }
        let n = self.trie.node();
        self.node_of.insert(ptr.to_string(), n);
        n
    }

    fn target(&self, r: &str, ptr: &str) -> Option<(String, &'a Value)> {
        let t = self.resources.resolve(r, ptr, self.root)?;
        let v = self.root.pointer(&t)?;
        Some((t, v))
    }

    /// The subschemas of `m` (at `ptr`), each with how it relates to the
    /// place of `m`.
    fn children<'v>(
        &self,
        m: &'v serde_json::Map<String, Value>,
        ptr: &str,
    ) -> Vec<(&'v Value, String, Edge)> {
        let mut out = Vec::new();
        if let Some(Value::Object(props)) = m.get("properties") {
            let base = push(ptr, "properties");
            for (k, s) in props {
                out.push((s, push(&base, k), Edge::Key(k.clone())));
            }
        }
        match m.get("items") {
            Some(Value::Array(list)) => {
                for (i, s) in list.iter().enumerate() {
                    out.push((
                        s,
                        push(&push(ptr, "items"), &i.to_string()),
                        Edge::Lost("under tuple items"),
                    ));
                }
            }
            Some(s) => out.push((s, push(ptr, "items"), Edge::Items)),
            None => {}
        }
        if let Some(Value::Array(list)) = m.get("allOf") {
            for (i, s) in list.iter().enumerate() {
                out.push((s, push(&push(ptr, "allOf"), &i.to_string()), Edge::Here));
            }
        }
        for kw in ["anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = m.get(kw) {
                for (i, s) in list.iter().enumerate() {
                    // A branch's place is told when no other branch
                    // admits an array.
                    let alone = list
                        .iter()
                        .enumerate()
                        .all(|(j, o)| j == i || self.never_array(o, 0));
                    let edge = if alone {
                        Edge::Here
                    } else {
                        Edge::Lost("in an anyOf/oneOf branch beside others that admit arrays")
                    };
                    out.push((s, push(&push(ptr, kw), &i.to_string()), edge));
                }
            }
        }
        if let Some(Value::Array(list)) = m.get("prefixItems") {
            for (i, s) in list.iter().enumerate() {
                out.push((
                    s,
                    push(&push(ptr, "prefixItems"), &i.to_string()),
                    Edge::Lost("under prefixItems"),
                ));
            }
        }
        // The patterns as the matcher will match keys with them; an
        // unreadable one (lookaround) leaves its own members' place, and
        // the undeclared keys', untold.
        let mut all_read = true;
        if let Some(Value::Object(map)) = m.get("patternProperties") {
            let base = push(ptr, "patternProperties");
            for (k, s) in map {
                // Matched as the generator matched declared names with it.
                let edge = match KeyMatcher::new(k) {
                    Some(re) => Edge::Pattern(Arc::new(re)),
                    None => {
                        all_read = false;
                        Edge::Lost("under patternProperties whose pattern the check cannot read")
                    }
                };
                out.push((s, push(&base, k), edge));
            }
        }
        if let Some(s) = m.get("additionalProperties") {
            let edge = if !all_read {
                Edge::Lost("under additionalProperties beside a pattern the check cannot read")
            } else {
                Edge::Other(
                    m.get("properties")
                        .and_then(Value::as_object)
                        .map(|p| p.keys().cloned().collect())
                        .unwrap_or_default(),
                )
            };
            out.push((s, push(ptr, "additionalProperties"), edge));
        }
        for (kw, why) in [
            ("additionalItems", "under additionalItems"),
            ("contains", "under contains"),
            ("unevaluatedItems", "under unevaluatedItems"),
            ("unevaluatedProperties", "under unevaluatedProperties"),
            ("propertyNames", "under propertyNames"),
            ("not", "under not"),
            ("if", "under if"),
            ("then", "under then/else"),
            ("else", "under then/else"),
        ] {
            if let Some(s) = m.get(kw) {
                out.push((s, push(ptr, kw), Edge::Lost(why)));
            }
        }
        for (kw, why) in [
            ("dependentSchemas", "under dependentSchemas"),
            ("dependencies", "under dependencies"),
        ] {
            if let Some(Value::Object(map)) = m.get(kw) {
                let base = push(ptr, kw);
                for (k, s) in map {
                    out.push((s, push(&base, k), Edge::Lost(why)));
                }
            }
        }
        out
    }

    fn count(&mut self) -> bool {
        self.visits += 1;
        if self.visits > MAX_VISITS {
            self.failed = true;
        }
        !self.failed
    }

    /// The schema at `ptr`, reached with a place: its node and edges.
    fn placed(&mut self, v: &Value, ptr: String) -> Option<u32> {
        let Value::Object(m) = v else { return None };
        let n = self.node(&ptr);
        if !self.placed.insert(ptr.clone()) || !self.count() {
            return Some(n);
        }
        if m.contains_key("$dynamicRef") || m.contains_key("$recursiveRef") {
            // The target depends on the dynamic scope.
            self.failed = true;
            return Some(n);
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true)) {
            let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let tuple =
                m.contains_key("prefixItems") || m.get("items").is_some_and(Value::is_array);
            let listed = m
                .get("items")
                .filter(|_| !tuple)
                .and_then(|i| self.listed(i));
            self.trie.mark(n, min, listed);
        }
        if let Some(Value::String(r)) = m.get("$ref") {
            match self.target(r, &ptr) {
                Some((t, tv)) => {
                    if let Some(c) = self.placed(tv, t) {
                        self.trie.add_also(n, c);
                    }
                }
                None => self.failed = true,
            }
        }
        for (s, p, edge) in self.children(m, &ptr) {
            match edge {
                Edge::Lost(why) => self.unplaced(s, p, why),
                edge => {
                    let Some(c) = self.placed(s, p) else { continue };
                    match edge {
                        Edge::Here => self.trie.add_also(n, c),
                        Edge::Key(k) => self.trie.add_key(n, &k, c),
                        Edge::Pattern(re) => self.trie.add_pattern(n, re, c),
                        Edge::Other(declared) => self.trie.add_other(n, declared, c),
                        Edge::Items => self.trie.add_items(n, c),
                        Edge::Lost(_) => unreachable!(),
                    }
                }
            }
        }
        Some(n)
    }

    /// The schema at `ptr`, and all below it, reached where the matcher
    /// cannot tell the place.
    fn unplaced(&mut self, v: &Value, ptr: String, why: &'static str) {
        let Value::Object(m) = v else { return };
        if self.unplaced.contains_key(&ptr) || !self.count() {
            return;
        }
        self.unplaced.insert(ptr.clone(), why);
        if let Some(Value::String(r)) = m.get("$ref") {
            if let Some((t, tv)) = self.target(r, &ptr) {
                self.unplaced(tv, t, why);
            }
        }
        for (s, p, _) in self.children(m, &ptr) {
            self.unplaced(s, p, why);
        }
    }

    /// The schema `v` after its `$ref`s (a few hops).
    fn deref<'v>(&'v self, mut v: &'v Value) -> &'v Value {
        for _ in 0..16 {
            let Some(Value::String(r)) = v.get("$ref") else {
                return v;
            };
            if v.as_object().is_some_and(|m| m.len() > 1) {
                return v;
            }
            // A bare `$ref`: relative references resolve from the root's
            // base (a document's own `#/...` pointers, the usual case).
            match self
                .resources
                .resolve(r, "", self.root)
                .and_then(|t| self.root.pointer(&t))
            {
                Some(t) => v = t,
                None => return v,
            }
        }
        v
    }

    /// The values `v` admits, where it lists them and says nothing else
    /// (annotations and a `type` every value has aside), canonical.
    fn listed(&self, v: &Value) -> Option<Vec<Box<[u8]>>> {
        let Value::Object(m) = self.deref(v) else {
            return None;
        };
        const QUIET: [&str; 9] = [
            "enum",
            "const",
            "type",
            "description",
            "title",
            "default",
            "examples",
            "$comment",
            "deprecated",
        ];
        if m.keys().any(|k| !QUIET.contains(&k.as_str())) {
            return None;
        }
        let values: Vec<&Value> = match (m.get("const"), m.get("enum")) {
            (Some(c), None) => vec![c],
            (None, Some(Value::Array(e))) => e.iter().collect(),
            _ => return None,
        };
        let has_type = |v: &Value, t: &str| match t {
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        };
        let typed = |v: &Value| match m.get("type") {
            None => true,
            Some(Value::String(t)) => has_type(v, t),
            Some(Value::Array(ts)) => ts
                .iter()
                .any(|t| t.as_str().is_some_and(|t| has_type(v, t))),
            _ => false,
        };
        if !values
            .iter()
            .all(|v| typed(v) && !v.is_array() && !v.is_object())
        {
            return None;
        }
        Some(
            values
                .iter()
                .map(|v| {
                    crate::unique::canonical(&serde_json::to_vec(v).unwrap_or_default())
                        .into_boxed_slice()
                })
                .collect(),
        )
    }

    /// Whether `v` admits no array.
    fn never_array(&self, v: &Value, depth: usize) -> bool {
        if depth > 8 {
            return false;
        }
        let v = self.deref(v);
        match v {
            Value::Bool(b) => !b,
            Value::Object(m) => {
                if let Some(c) = m.get("const") {
                    return !c.is_array();
                }
                if let Some(Value::Array(e)) = m.get("enum") {
                    return !e.iter().any(Value::is_array);
                }
                match m.get("type") {
                    Some(Value::String(t)) => return t != "array",
                    Some(Value::Array(ts)) => return !ts.iter().any(|t| t == "array"),
                    _ => {}
                }
                if let Some(Value::Array(all)) = m.get("allOf") {
                    if all.iter().any(|s| self.never_array(s, depth + 1)) {
                        return true;
                    }
                }
                false
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn places_decide_which_arrays_are_checked() {
        let s = json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "maybe": {"anyOf": [
                    {"type": "array", "items": {"$ref": "#/$defs/n"}, "uniqueItems": true},
                    {"type": "null"}
                ]},
                "either": {"anyOf": [
                    {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                    {"type": "array", "items": {"type": "string"}}
                ]},
                "objs": {"type": "array", "items": {"type": "object"}, "uniqueItems": true}
            },
            "patternProperties": {
                "^x": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "(?=y)": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "^(?!z)w": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
            },
            "$defs": {"n": {"type": "integer"}}
        });
        let sites = sites(&s);
        for p in ["/properties/maybe/anyOf/0", "/properties/tags"] {
            assert!(sites.checked.contains(p), "{p}");
        }
        assert!(sites.checked.contains("/properties/objs"));
        // Patterns the check can match keys with (a leading lookahead as
        // the generator reads it too); a lookahead elsewhere not.
        assert!(sites.checked.contains("/patternProperties/^x"));
        assert!(sites.checked.contains("/patternProperties/^(?!z)w"));
        for p in ["/properties/either/anyOf/0", "/patternProperties/(?=y)"] {
            assert!(
                !sites.checked.contains(p) && sites.refused.contains_key(p),
                "{p}"
            );
        }
        assert!(!sites.trie.is_empty());
    }

    #[test]
    fn recursion_is_a_cycle() {
        let s = json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "child": {"$ref": "#"}
            }
        });
        assert!(sites(&s).checked.contains("/properties/tags"));
        let d = json!({"properties": {"a": {"$dynamicRef": "#x"}, "t": {"type": "array", "uniqueItems": true}}});
        assert!(sites(&d).checked.is_empty());
    }
}

//! Where `uniqueItems` can be left to the matcher's run-time check
//! ([`crate::unique`]).
//!
//! The matcher knows an array only by its place in the output: the keys and
//! items that lead to it. So the check is exact only where that place alone
//! says the array must hold distinct items, whatever else the document does.
//! A schema reached from the root through `properties`, `items` (one schema
//! for every item), `allOf`, `$ref`, and an `anyOf` / `oneOf` branch whose
//! sibling branches admit no array, applies to every value at its place
//! that is an array; a schema reached through anything else (alternatives
//! that may also be arrays, `if`, `not`, pattern or extra keys, tuple items,
//! `contains`, a recursive `$ref`, a `$dynamicRef`) does not, and its
//! `uniqueItems` stays refused as before.

use super::ir::resources::Resources;
use crate::unique::UniqueItems;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Where a schema applies: a node of the trie, or why the matcher cannot
/// tell the place.
type Place = Result<u32, &'static str>;

/// Most schema nodes one walk visits (a walk past it checks nothing).
const MAX_VISITS: usize = 100_000;

/// The arrays the matcher checks: their schemas' pointers and the trie of
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
    // First pass: the pointers a `$ref` re-enters (their places repeat
    // without end, which the trie cannot hold). Second: the walk that
    // counts, entering those with no place.
    let mut recursive = HashSet::new();
    for pass in 0..2 {
        let mut w = Walk {
            root,
            resources: &resources,
            trie: UniqueItems::new(),
            stack: Vec::new(),
            visits: 0,
            failed: false,
            recursive: std::mem::take(&mut recursive),
            found: HashMap::new(),
            visited: HashMap::new(),
            second: pass == 1,
        };
        w.walk(root, String::new(), Ok(0));
        if w.failed {
            break;
        }
        if pass == 0 {
            recursive = w.recursive;
            continue;
        }
        // Every place a `uniqueItems` schema is seen at is checked (where
        // the generator keeps the keyword exact, the check finds nothing
        // to refuse). A schema the generator lowers (its own or one merged
        // into it through `$ref` / `allOf`) is checked when each of its
        // places is one of those.
        let mut trie = w.trie;
        for places in w.found.values() {
            for (at, min, listed) in places {
                if let Ok(a) = at {
                    trie.mark(*a, *min, listed.clone());
                }
            }
        }
        let mut checked = HashSet::new();
        let mut refused = HashMap::new();
        for (ptr, places) in w.visited {
            let found_why = w
                .found
                .get(&ptr)
                .and_then(|f| f.iter().find_map(|p| p.0.err()));
            match places.iter().find_map(|p| p.err()).or(found_why) {
                Some(why) => {
                    refused.insert(ptr, why);
                }
                None if places.iter().all(|p| p.is_ok_and(|a| trie.is_unique(a))) => {
                    checked.insert(ptr);
                }
                None => {}
            }
        }
        return Sites {
            checked,
            refused,
            trie,
        };
    }
    Sites {
        checked: HashSet::new(),
        refused: HashMap::new(),
        trie: UniqueItems::new(),
    }
}

struct Walk<'a> {
    root: &'a Value,
    resources: &'a Resources,
    trie: UniqueItems,
    stack: Vec<String>,
    visits: usize,
    failed: bool,
    recursive: HashSet<String>,
    /// Per schema with `uniqueItems: true`: the place of each visit
    /// (`None`: not one the matcher can check) and its `minItems`.
    found: HashMap<String, Vec<(Place, u64, Option<Vec<Box<[u8]>>>)>>,
    /// Every schema object's places.
    visited: HashMap<String, Vec<Place>>,
    second: bool,
}

fn push(ptr: &str, token: &str) -> String {
    format!("{ptr}/{}", token.replace('~', "~0").replace('/', "~1"))
}

impl Walk<'_> {
    fn walk(&mut self, v: &Value, ptr: String, mut at: Place) {
        let Value::Object(m) = v else { return };
        self.visits += 1;
        if self.visits > MAX_VISITS {
            self.failed = true;
        }
        if self.failed {
            return;
        }
        if self.stack.contains(&ptr) {
            self.recursive.insert(ptr);
            return;
        }
        if self.second && self.recursive.contains(&ptr) {
            at = Err("inside a recursive $ref");
        }
        if m.contains_key("$dynamicRef") || m.contains_key("$recursiveRef") {
            // The target depends on the dynamic scope.
            self.failed = true;
            return;
        }
        self.stack.push(ptr.clone());
        self.visited.entry(ptr.clone()).or_default().push(at);
        if m.get("uniqueItems") == Some(&Value::Bool(true)) {
            let place = at.and_then(|a| {
                if m.contains_key("prefixItems")
                    || m.contains_key("contains")
                    || m.get("items").is_some_and(Value::is_array)
                {
                    Err("beside prefixItems or contains")
                } else {
                    Ok(a)
                }
            });
            let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let listed = m.get("items").and_then(|i| self.listed(i));
            self.found
                .entry(ptr.clone())
                .or_default()
                .push((place, min, listed));
        }
        if let Some(Value::String(r)) = m.get("$ref") {
            match self.resources.resolve(r, &ptr, self.root) {
                Some(t) => {
                    if let Some(target) = self.root.pointer(&t) {
                        self.walk(target, t, at);
                    }
                }
                None => self.failed = true,
            }
        }
        if let Some(Value::Object(props)) = m.get("properties") {
            let base = push(&ptr, "properties");
            for (k, s) in props {
                let child = at.map(|a| self.trie.key(a, k));
                self.walk(s, push(&base, k), child);
            }
        }
        match m.get("items") {
            Some(Value::Array(list)) => {
                for (i, s) in list.iter().enumerate() {
                    self.walk(
                        s,
                        push(&push(&ptr, "items"), &i.to_string()),
                        Err("under tuple items"),
                    );
                }
            }
            Some(s) => {
                let child = at.map(|a| self.trie.items(a));
                self.walk(s, push(&ptr, "items"), child);
            }
            None => {}
        }
        if let Some(Value::Array(list)) = m.get("allOf") {
            for (i, s) in list.iter().enumerate() {
                self.walk(s, push(&push(&ptr, "allOf"), &i.to_string()), at);
            }
        }
        for kw in ["anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = m.get(kw) {
                for (i, s) in list.iter().enumerate() {
                    // A branch's place is checked when no other branch
                    // admits an array.
                    let alone = list
                        .iter()
                        .enumerate()
                        .all(|(j, o)| j == i || self.never_array(o, 0));
                    let here = at.and_then(|a| {
                        if alone {
                            Ok(a)
                        } else {
                            Err("in an anyOf/oneOf branch beside others that admit arrays")
                        }
                    });
                    self.walk(s, push(&push(&ptr, kw), &i.to_string()), here);
                }
            }
        }
        for kw in ["prefixItems"] {
            if let Some(Value::Array(list)) = m.get(kw) {
                for (i, s) in list.iter().enumerate() {
                    self.walk(
                        s,
                        push(&push(&ptr, kw), &i.to_string()),
                        Err("under prefixItems"),
                    );
                }
            }
        }
        if let Some(s) = m.get("additionalProperties") {
            // The keys this schema does not declare: exact where no
            // pattern could claim them too.
            let child = at.and_then(|a| {
                if m.contains_key("patternProperties") {
                    return Err("under additionalProperties beside patternProperties");
                }
                let declared: Vec<String> = m
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                Ok(self.trie.other(a, declared))
            });
            self.walk(s, push(&ptr, "additionalProperties"), child);
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
                self.walk(s, push(&ptr, kw), Err(why));
            }
        }
        for (kw, why) in [
            ("patternProperties", "under patternProperties"),
            ("dependentSchemas", "under dependentSchemas"),
            ("dependencies", "under dependencies"),
        ] {
            if let Some(Value::Object(map)) = m.get(kw) {
                let base = push(&ptr, kw);
                for (k, s) in map {
                    self.walk(s, push(&base, k), Err(why));
                }
            }
        }
        self.stack.pop();
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
            "patternProperties": {"^x": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}},
            "$defs": {"n": {"type": "integer"}}
        });
        let sites = sites(&s);
        for p in ["/properties/maybe/anyOf/0", "/properties/tags"] {
            assert!(sites.checked.contains(p), "{p}");
        }
        assert!(sites.checked.contains("/properties/objs"));
        for p in ["/properties/either/anyOf/0", "/patternProperties/^x"] {
            assert!(
                !sites.checked.contains(p) && sites.refused.contains_key(p),
                "{p}"
            );
        }
        assert!(!sites.trie.is_empty());
    }

    #[test]
    fn recursion_leaves_arrays_unchecked() {
        let s = json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "child": {"$ref": "#"}
            }
        });
        assert!(sites(&s).checked.is_empty());
    }
}

//! # Schema resources: `$id`, `$anchor` and URI references inside one document
//!
//! A `$ref` is a URI reference resolved against the base URI of the schema
//! object that holds it (RFC 3986 §5), and the base URI of an object is set
//! by the nearest `$id` on its path from the root (each `$id` itself
//! resolved against its parent's base). [`Resources::collect`] walks the
//! document once and records:
//!
//! - every *resource*: the absolute URI (no fragment) of each `$id` → the
//!   JSON Pointer of the object that declares it; the root is a resource
//!   under its own `$id`, or under [`DEFAULT_BASE`] when it has none;
//! - every plain-name *anchor*: (resource URI, name) → pointer, from
//!   `$anchor` and from the older fragment-only `$id: "#name"`;
//! - the base URI at each pointer that declares an `$id`.
//!
//! [`Resources::resolve`] maps a `$ref` at a pointer to the pointer of its
//! target: the resource its URI names, then the fragment, empty, a JSON
//! Pointer *relative to that resource*, or an anchor name. Nothing is
//! fetched: a URI that names no resource of the document is `None` (the
//! caller's "unresolvable `$ref`" error). Only the values of schema
//! keywords are walked: an `$id` inside data or an unknown keyword is not a
//! resource.
//!
//! Invariant: every pointer returned exists in the document (JSON Pointer
//! fragments are checked against the root).

use serde_json::Value;
use std::collections::HashMap;

/// The base URI of a document without a root `$id`. Relative references
/// resolve against it like against any other base; no document is ever
/// fetched from it.
pub const DEFAULT_BASE: &str = "https://constrain.invalid/root.json";

/// How deep [`Resources::collect`] walks (schemas nest far less).
const MAX_WALK_DEPTH: usize = 64;

/// The resources, anchors and base URIs of one document.
#[derive(Debug, Default)]
pub struct Resources {
    /// Absolute URI (no fragment) → pointer of the declaring object.
    resources: HashMap<String, String>,
    /// (resource URI, anchor name) → pointer.
    anchors: HashMap<(String, String), String>,
    /// Pointer of an object with `$id` → its base URI.
    bases: HashMap<String, String>,
    /// `$dynamicAnchor` name → the (resource URI, pointer) of each one.
    dynamic: HashMap<String, Vec<(String, String)>>,
    /// Whether `id` (no `$`) names a resource: drafts 3 and 4 only.
    legacy_id: bool,
    /// The absolute URI (no fragment) named by each `$ref`, `$dynamicRef`
    /// and `$recursiveRef` of the document (what [`super::super::documents`]
    /// bundles).
    referenced: Vec<String>,
    /// Pointers of the objects with `$recursiveAnchor: true` (2019-09).
    recursive: Vec<String>,
}

/// Whether the document's `$schema` is draft 3 or 4, where the identifier
/// keyword is `id`. From draft 6 on `id` is an ordinary property name, and
/// schemas that still carry one (`"id": "MyModule.Def"` beside a
/// `"$schema"` of draft 7) must not have their `$ref`s re-based by it.
fn legacy_id(root: &Value) -> bool {
    root.get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("draft-03") || s.contains("draft-04"))
}

impl Resources {
    /// Walks `root` once and records its resources and anchors.
    pub fn collect(root: &Value) -> Resources {
        let mut r = Resources {
            legacy_id: legacy_id(root),
            ..Resources::default()
        };
        r.resources.insert(DEFAULT_BASE.to_string(), String::new());
        r.bases.insert(String::new(), DEFAULT_BASE.to_string());
        let legacy = r.legacy_id;
        r.walk(root, "", DEFAULT_BASE, legacy, 0);
        r
    }

    /// Whether `uri` (absolute, no fragment) names a resource of the document.
    pub fn has_resource(&self, uri: &str) -> bool {
        self.resources.contains_key(uri)
    }

    /// The absolute URIs (no fragment) the document's references name.
    pub fn referenced(&self) -> &[String] {
        &self.referenced
    }

    fn walk(&mut self, v: &Value, at: &str, base: &str, legacy: bool, depth: usize) {
        if depth > MAX_WALK_DEPTH {
            return;
        }
        match v {
            Value::Object(m) => {
                let mut base = base.to_string();
                // Draft 3 / 4 name resources with `id` only (`$id` is an
                // unknown keyword there, as validators of those drafts
                // read it); later drafts with `$id`.
                let id = if legacy {
                    m.get("id").and_then(Value::as_str)
                } else {
                    m.get("$id").and_then(Value::as_str)
                };
                if let Some(id) = id {
                    let abs = resolve_uri(&base, id);
                    let (uri, frag) = split_fragment(&abs);
                    if !id.starts_with('#') {
                        base = uri.to_string();
                        self.resources.insert(base.clone(), at.to_string());
                        self.bases.insert(at.to_string(), base.clone());
                    }
                    if let Some(name) = frag.filter(|f| !f.is_empty() && !f.starts_with('/')) {
                        self.anchors
                            .insert((uri.to_string(), name.to_string()), at.to_string());
                    }
                }
                if let Some(Value::String(a)) = m.get("$anchor") {
                    self.anchors
                        .insert((base.clone(), a.clone()), at.to_string());
                }
                // A `$dynamicAnchor` is also a plain anchor for `$ref`.
                if let Some(Value::String(a)) = m.get("$dynamicAnchor") {
                    self.anchors
                        .insert((base.clone(), a.clone()), at.to_string());
                    self.dynamic
                        .entry(a.clone())
                        .or_default()
                        .push((base.clone(), at.to_string()));
                }
                if m.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                    self.recursive.push(at.to_string());
                }
                for kw in ["$ref", "$dynamicRef", "$recursiveRef"] {
                    if let Some(Value::String(r)) = m.get(kw) {
                        let abs = resolve_uri(&base, r);
                        self.referenced.push(split_fragment(&abs).0.to_string());
                    }
                }
                for (k, c) in m {
                    let child = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    match subschemas(k) {
                        Some(Holds::One) => self.walk(c, &child, &base, legacy, depth + 1),
                        Some(Holds::List) => match c {
                            Value::Array(a) => {
                                for (i, e) in a.iter().enumerate() {
                                    self.walk(e, &format!("{child}/{i}"), &base, legacy, depth + 1);
                                }
                            }
                            // `items` as one schema (2020-12).
                            _ => self.walk(c, &child, &base, legacy, depth + 1),
                        },
                        Some(Holds::Map) => {
                            if let Value::Object(o) = c {
                                for (n, e) in o {
                                    let n = n.replace('~', "~0").replace('/', "~1");
                                    self.walk(e, &format!("{child}/{n}"), &base, legacy, depth + 1);
                                }
                            }
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// The base URI in force at `pointer`: that of the nearest enclosing
    /// object with an `$id` (the object itself included).
    pub fn base_at(&self, pointer: &str) -> &str {
        let mut p = pointer;
        loop {
            if let Some(b) = self.bases.get(p) {
                return b;
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return DEFAULT_BASE,
            }
        }
    }

    /// The pointer a `$ref` written at `pointer` names, or `None` when it
    /// names nothing in this document. `root` checks JSON Pointer fragments.
    pub fn resolve(&self, reference: &str, pointer: &str, root: &Value) -> Option<String> {
        let abs = resolve_uri(self.base_at(pointer), reference);
        let (uri, frag) = split_fragment(&abs);
        let frag = percent_decode(frag.unwrap_or(""));
        let resource = self.resources.get(uri)?;
        if frag.is_empty() {
            return Some(resource.clone());
        }
        if frag.starts_with('/') {
            let target = format!("{resource}{frag}");
            return root.pointer(&target).map(|_| target);
        }
        self.anchors.get(&(uri.to_string(), frag)).cloned()
    }
}

/// The dynamic scope, as far as `$dynamicRef` can see it: for each
/// `$dynamicAnchor` name that more than one resource of the document
/// defines, the pointer of that anchor in the *outermost* resource of the
/// scope that defines it (2020-12 Core §8.2.3.2). Entering a resource only
/// ever adds names, so a scope is fixed by a finite choice per name.
pub type Scope = std::collections::BTreeMap<String, String>;

impl Resources {
    /// Whether a `$dynamicRef`'s target can depend on the dynamic scope at
    /// all: some `$dynamicAnchor` name is defined more than once.
    pub fn has_dynamic_scope(&self) -> bool {
        self.dynamic.values().any(|all| all.len() > 1)
    }

    /// `scope` after entering the resource that holds `pointer`: every
    /// ambiguous anchor name that resource defines, and the scope lacks,
    /// is added.
    pub fn enter(&self, scope: &Scope, pointer: &str) -> Scope {
        let uri = self.base_at(pointer);
        let mut out = scope.clone();
        for (name, all) in &self.dynamic {
            if all.len() > 1 && !out.contains_key(name) {
                if let Some((_, p)) = all.iter().find(|(u, _)| u == uri) {
                    out.insert(name.clone(), p.clone());
                }
            }
        }
        out
    }

    /// The pointer a `$dynamicRef` written at `pointer` names in the dynamic
    /// `scope`: its initial target (resolved as a `$ref`) unless that target
    /// carries a `$dynamicAnchor` of the fragment's name, and then the
    /// anchor of that name in the outermost resource of the scope that has
    /// one (`scope`; the initial target when none does, or when the
    /// document defines the name once). `None`: it names nothing here.
    pub fn resolve_dynamic(
        &self,
        reference: &str,
        pointer: &str,
        root: &Value,
        scope: &Scope,
    ) -> Option<String> {
        let target = self.resolve(reference, pointer, root)?;
        let abs = resolve_uri(self.base_at(pointer), reference);
        let name = percent_decode(split_fragment(&abs).1.unwrap_or(""));
        let Some(all) = self.dynamic.get(&name) else {
            return Some(target);
        };
        if !all.iter().any(|(_, p)| *p == target) {
            return Some(target);
        }
        Some(scope.get(&name).cloned().unwrap_or(target))
    }

    /// The pointer a `$recursiveRef` (2019-09) written at `pointer` names,
    /// where it resolves statically: its initial target (`"#"`, the root
    /// of its resource, resolved as a `$ref`) is final unless that target
    /// carries `$recursiveAnchor: true`, and even then when it is the only
    /// such resource of the document. `Err`: why not.
    pub fn resolve_recursive(
        &self,
        reference: &str,
        pointer: &str,
        root: &Value,
    ) -> Result<Option<String>, String> {
        let Some(target) = self.resolve(reference, pointer, root) else {
            return Ok(None);
        };
        if !self.recursive.contains(&target) || self.recursive.len() == 1 {
            return Ok(Some(target));
        }
        Err(format!(
            "{} resources with \"$recursiveAnchor\": true in the document; the target depends on the dynamic scope",
            self.recursive.len()
        ))
    }
}

/// `(uri, fragment)`: the part before the first `#` and the part after it.
pub(crate) fn split_fragment(s: &str) -> (&str, Option<&str>) {
    match s.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (s, None),
    }
}

/// What a keyword's value holds: one subschema, an array of them, or an
/// object whose values are subschemas.
enum Holds {
    One,
    List,
    Map,
}

/// The keywords whose values are schemas. Identifiers anywhere else (under
/// unknown keywords, in data) are not resources.
fn subschemas(keyword: &str) -> Option<Holds> {
    match keyword {
        "additionalProperties"
        | "additionalItems"
        | "contains"
        | "not"
        | "if"
        | "then"
        | "else"
        | "propertyNames"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "contentSchema" => Some(Holds::One),
        "items" | "allOf" | "anyOf" | "oneOf" | "prefixItems" => Some(Holds::List),
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas"
        | "dependencies" => Some(Holds::Map),
        _ => None,
    }
}

/// The five components of a URI reference (RFC 3986 appendix B).
struct Parts<'s> {
    scheme: Option<&'s str>,
    authority: Option<&'s str>,
    path: &'s str,
    query: Option<&'s str>,
    fragment: Option<&'s str>,
}

fn parse(s: &str) -> Parts<'_> {
    let (rest, fragment) = match s.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (s, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (scheme, rest) = match rest.find([':', '/']) {
        Some(i) if rest.as_bytes()[i] == b':' && i > 0 => (Some(&rest[..i]), &rest[i + 1..]),
        _ => (None, rest),
    };
    let (authority, path) = match rest.strip_prefix("//") {
        Some(r) => {
            let end = r.find('/').unwrap_or(r.len());
            (Some(&r[..end]), &r[end..])
        }
        None => (None, rest),
    };
    Parts {
        scheme,
        authority,
        path,
        query,
        fragment,
    }
}

/// RFC 3986 §5.2.4.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let absolute = path.starts_with('/');
    let segs: Vec<&str> = path.split('/').collect();
    let n = segs.len();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == n;
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > usize::from(absolute) {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if absolute && !joined.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Resolves the URI reference `r` against the absolute URI `base`
/// (RFC 3986 §5.2.2, strict).
pub fn resolve_uri(base: &str, r: &str) -> String {
    let b = parse(base);
    let r = parse(r);
    let (scheme, authority, path, query);
    if r.scheme.is_some() {
        scheme = r.scheme;
        authority = r.authority;
        path = remove_dot_segments(r.path);
        query = r.query;
    } else {
        scheme = b.scheme;
        if r.authority.is_some() {
            authority = r.authority;
            path = remove_dot_segments(r.path);
            query = r.query;
        } else {
            authority = b.authority;
            if r.path.is_empty() {
                path = b.path.to_string();
                query = r.query.or(b.query);
            } else {
                query = r.query;
                if r.path.starts_with('/') {
                    path = remove_dot_segments(r.path);
                } else {
                    let merged = if b.authority.is_some() && b.path.is_empty() {
                        format!("/{}", r.path)
                    } else {
                        match b.path.rfind('/') {
                            Some(i) => format!("{}{}", &b.path[..=i], r.path),
                            None => r.path.to_string(),
                        }
                    };
                    path = remove_dot_segments(&merged);
                }
            }
        }
    }
    let mut out = String::new();
    if let Some(s) = scheme {
        out.push_str(s);
        out.push(':');
    }
    if let Some(a) = authority {
        out.push_str("//");
        out.push_str(a);
    }
    out.push_str(&path);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    if let Some(f) = r.fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// `%XX` escapes decoded (a JSON Pointer fragment may carry them).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|t| u8::from_str_radix(t, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc3986_examples() {
        let base = "http://a/b/c/d;p?q";
        for (r, want) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("#s", "http://a/b/c/d;p?q#s"),
            ("", "http://a/b/c/d;p?q"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../../g", "http://a/g"),
            ("g:h", "g:h"),
        ] {
            assert_eq!(resolve_uri(base, r), want, "{r}");
        }
        assert_eq!(
            resolve_uri("urn:uuid:deadbeef", "#/$defs/a"),
            "urn:uuid:deadbeef#/$defs/a"
        );
    }

    #[test]
    fn ids_anchors_and_relative_refs() {
        let doc = json!({
            "$id": "http://example.com/root.json",
            "$defs": {
                "A": {"$id": "nested/a.json", "$anchor": "top",
                      "$defs": {"B": {"$anchor": "b", "type": "string"}}},
                "C": {"$id": "#legacy"},
                "D": {"const": {"$id": "http://example.com/data.json"}}
            }
        });
        let r = Resources::collect(&doc);
        let at = |p: &str, s: &str| r.resolve(s, p, &doc);
        assert_eq!(at("", "nested/a.json").as_deref(), Some("/$defs/A"));
        assert_eq!(
            at("", "http://example.com/nested/a.json#b").as_deref(),
            Some("/$defs/A/$defs/B")
        );
        // Relative to the nested resource's own base.
        assert_eq!(at("/$defs/A/$defs/B", "#top").as_deref(), Some("/$defs/A"));
        assert_eq!(at("/$defs/A", "../root.json").as_deref(), Some(""));
        assert_eq!(at("/$defs/A", "root.json"), None);
        assert_eq!(
            at("/$defs/A", "#/$defs/B").as_deref(),
            Some("/$defs/A/$defs/B")
        );
        assert_eq!(at("", "#legacy").as_deref(), Some("/$defs/C"));
        // Data is not a resource; other documents are never fetched.
        assert_eq!(at("", "data.json"), None);
        assert_eq!(at("", "http://example.com/other.json"), None);
        assert_eq!(at("", "#/$defs/missing"), None);
    }

    #[test]
    fn dynamic_refs_resolve_by_the_outermost_anchor_in_scope() {
        let none = Scope::new();
        let one = json!({
            "$id": "http://e.com/list.json",
            "$dynamicAnchor": "items",
            "items": {"$dynamicRef": "#items"}
        });
        let r = Resources::collect(&one);
        assert!(!r.has_dynamic_scope());
        assert_eq!(
            r.resolve_dynamic("#items", "/items", &one, &none),
            Some(String::new())
        );
        let two = json!({
            "$id": "http://e.com/root.json",
            "$dynamicAnchor": "items",
            "$defs": {"list": {"$id": "list.json", "$dynamicAnchor": "items",
                               "items": {"$dynamicRef": "#items"}}}
        });
        let r = Resources::collect(&two);
        assert!(r.has_dynamic_scope());
        // Entered through the root: the root's anchor is the outermost.
        let from_root = r.enter(&r.enter(&none, ""), "/$defs/list");
        assert_eq!(
            r.resolve_dynamic("#items", "/$defs/list/items", &two, &from_root),
            Some(String::new())
        );
        // Entered at the list alone: its own anchor.
        let alone = r.enter(&none, "/$defs/list");
        assert_eq!(
            r.resolve_dynamic("#items", "/$defs/list/items", &two, &alone),
            Some("/$defs/list".into())
        );
        // An initial target without a matching `$dynamicAnchor`: a plain `$ref`.
        let plain = json!({
            "$id": "http://e.com/root.json",
            "$dynamicAnchor": "items",
            "$defs": {"list": {"$id": "list.json", "$anchor": "items",
                               "items": {"$dynamicRef": "#items"}}}
        });
        let r = Resources::collect(&plain);
        assert_eq!(
            r.resolve_dynamic("#items", "/$defs/list/items", &plain, &r.enter(&none, "")),
            Some("/$defs/list".into())
        );
    }

    #[test]
    fn recursive_refs_resolve_statically_when_one_anchor_can_match() {
        let one = json!({"$recursiveAnchor": true, "items": {"$recursiveRef": "#"}});
        let r = Resources::collect(&one);
        assert_eq!(
            r.resolve_recursive("#", "/items", &one),
            Ok(Some(String::new()))
        );
        let two = json!({
            "$id": "http://e.com/root.json", "$recursiveAnchor": true,
            "$defs": {"t": {"$id": "t.json", "$recursiveAnchor": true,
                            "items": {"$recursiveRef": "#"}},
                      "u": {"$id": "u.json", "items": {"$recursiveRef": "#"}}}
        });
        let r = Resources::collect(&two);
        assert!(r.resolve_recursive("#", "/$defs/t/items", &two).is_err());
        // The initial target has no `$recursiveAnchor`: a plain `$ref`.
        assert_eq!(
            r.resolve_recursive("#", "/$defs/u/items", &two),
            Ok(Some("/$defs/u".into()))
        );
    }

    #[test]
    fn ids_under_unknown_keywords_are_not_resources() {
        let doc = json!({
            "$defs": {
                "X": {"not": {"array_of_schemas": [{"$id": "http://e.com/a.json"}]}},
                "Y": {"items": {"$id": "http://e.com/b.json"}},
                "Z": {"properties": {"p": {"$id": "http://e.com/c.json"}}}
            }
        });
        let r = Resources::collect(&doc);
        assert_eq!(r.resolve("http://e.com/a.json", "", &doc), None);
        assert_eq!(
            r.resolve("http://e.com/b.json", "", &doc).as_deref(),
            Some("/$defs/Y/items")
        );
        assert_eq!(
            r.resolve("http://e.com/c.json", "", &doc).as_deref(),
            Some("/$defs/Z/properties/p")
        );
    }

    #[test]
    fn plain_id_is_an_identifier_only_in_drafts_3_and_4() {
        let def = json!({"id": "Mod.Def", "type": "object",
                         "properties": {"nest": {"$ref": "#/definitions/Mod.Def"}}});
        let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#",
                            "definitions": {"Mod.Def": def}});
        let r = Resources::collect(&draft7);
        let at = "/definitions/Mod.Def/properties/nest";
        assert_eq!(
            r.resolve("#/definitions/Mod.Def", at, &draft7).as_deref(),
            Some("/definitions/Mod.Def")
        );
        let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#",
                            "definitions": {"A": {"id": "http://e.com/a.json"},
                                            "B": {"$id": "b.json",
                                                  "oneOf": [{"$ref": "#/definitions/A"}]}}});
        let r = Resources::collect(&draft4);
        assert_eq!(
            r.resolve("http://e.com/a.json", "", &draft4).as_deref(),
            Some("/definitions/A")
        );
        // `$id` is no identifier in draft 4: the `$ref` stays in the root.
        assert_eq!(
            r.resolve("#/definitions/A", "/definitions/B/oneOf/0", &draft4)
                .as_deref(),
            Some("/definitions/A")
        );
    }
}

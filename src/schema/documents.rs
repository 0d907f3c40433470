//! # Registered documents and the bundled meta-schemas
//!
//! A `$ref` may name another schema document by URI
//! (`{"$ref": "https://example.com/address.json#/$defs/street"}`). Nothing is
//! ever fetched: the documents a schema may reach are either *registered*
//! ([`Documents`], `--schema-dir` on the command line, `documents=` in
//! Python) or one of the JSON Schema meta-schemas compiled into the library
//! (drafts 4, 6, 7, 2019-09 and 2020-12, with their vocabularies).
//!
//! [`bundle`] turns a schema and the documents it reaches into one
//! *compound* document, the bundling form the specification describes
//! (2020-12 Core §9.3): each reached document becomes an embedded resource
//! under the root's `$defs`, keyed by its URI and carrying that URI as its
//! `$id`. `$ref`s then resolve into it exactly as into the main document:
//! its own `$id` base, anchors and JSON Pointers relative to it. (Whether
//! draft-04's `id` names nested resources is read from the main document's
//! `$schema` alone: real schemas carry a deeper `$schema` beside an `id`
//! not meant as a base.) Only
//! documents some reference names are embedded, to a fixpoint (a registered
//! document may reference another). The key makes a JSON Pointer into an
//! embedded document name it, so an error inside a meta-schema says so:
//! `/$defs/https:~1~1json-schema.org~1draft~12020-12~1meta~1validation/...`.
//!
//! Invariant: bundling adds only `$defs` entries whose URIs no resource of
//! the document already declares, so it never changes what an existing
//! reference names; a reference it cannot satisfy stays unresolvable (the
//! compiler's `unresolvable $ref` error).

use super::ir::resources::{resolve_uri, split_fragment, Resources};
use super::{Pointer, SchemaError};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// The meta-schemas compiled into the library (file contents).
const META_SCHEMAS: &[&str] = &[
    include_str!("metaschemas/draft4.json"),
    include_str!("metaschemas/draft6.json"),
    include_str!("metaschemas/draft7.json"),
    include_str!("metaschemas/draft2019-09/schema.json"),
    include_str!("metaschemas/draft2019-09/meta/applicator.json"),
    include_str!("metaschemas/draft2019-09/meta/content.json"),
    include_str!("metaschemas/draft2019-09/meta/core.json"),
    include_str!("metaschemas/draft2019-09/meta/format.json"),
    include_str!("metaschemas/draft2019-09/meta/meta-data.json"),
    include_str!("metaschemas/draft2019-09/meta/validation.json"),
    include_str!("metaschemas/draft2020-12/schema.json"),
    include_str!("metaschemas/draft2020-12/meta/applicator.json"),
    include_str!("metaschemas/draft2020-12/meta/content.json"),
    include_str!("metaschemas/draft2020-12/meta/core.json"),
    include_str!("metaschemas/draft2020-12/meta/format-annotation.json"),
    include_str!("metaschemas/draft2020-12/meta/format-assertion.json"),
    include_str!("metaschemas/draft2020-12/meta/meta-data.json"),
    include_str!("metaschemas/draft2020-12/meta/unevaluated.json"),
    include_str!("metaschemas/draft2020-12/meta/validation.json"),
];

/// The identifier a document declares: `$id`, or `id` in drafts 3 and 4.
fn declared_id(doc: &Value) -> Option<&str> {
    let legacy = doc
        .get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("draft-03") || s.contains("draft-04"));
    match doc.get("$id") {
        Some(v) => v.as_str(),
        None if legacy => doc.get("id").and_then(Value::as_str),
        None => None,
    }
}

/// The meta-schema published under `uri` (absolute, no fragment), if any.
/// `http` and `https` spellings of the draft 4–7 URIs both name theirs.
pub fn meta_schema(uri: &str) -> Option<Value> {
    use std::sync::OnceLock;
    static PARSED: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    let all = PARSED.get_or_init(|| {
        META_SCHEMAS
            .iter()
            .map(|text| {
                let v: Value = serde_json::from_str(text).expect("bundled meta-schema parses");
                let id = declared_id(&v).expect("a meta-schema declares its URI");
                (split_fragment(id).0.to_string(), v)
            })
            .collect()
    });
    all.get(uri)
        .or_else(|| {
            all.get(&uri.replacen(
                "https://json-schema.org/draft-0",
                "http://json-schema.org/draft-0",
                1,
            ))
        })
        .cloned()
}

/// Schema documents registered by URI, for `$ref`s into other documents.
///
/// ```
/// use constrain::schema::{compile, Documents, SchemaOptions};
/// use serde_json::json;
/// let mut docs = Documents::new();
/// docs.insert("https://example.com/point.json", json!({
///     "type": "object",
///     "properties": {"x": {"type": "integer"}},
///     "required": ["x"]
/// }))?;
/// let schema = json!({"$ref": "https://example.com/point.json"});
/// let out = compile(&docs.bundle(&schema)?, &SchemaOptions::default())?;
/// let re = regex::Regex::new(&format!("^(?:{})$", out.regex)).unwrap();
/// assert!(re.is_match(r#"{"x":1}"#));
/// # Ok::<(), constrain::schema::SchemaError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Documents {
    docs: BTreeMap<String, Value>,
}

impl Documents {
    /// No documents (the meta-schemas are always available).
    pub fn new() -> Documents {
        Documents::default()
    }

    /// Registers `doc` under the absolute URI `uri` (a trailing empty
    /// fragment `#` is dropped). A document that declares an `$id` must
    /// declare this URI (or a reference that resolves to it against `uri`).
    pub fn insert(&mut self, uri: &str, doc: Value) -> Result<(), SchemaError> {
        let invalid = |detail: String| SchemaError::Invalid {
            pointer: Pointer::root(),
            detail,
        };
        let (base, frag) = split_fragment(uri);
        if frag.is_some_and(|f| !f.is_empty()) || !has_scheme(base) {
            return Err(invalid(format!(
                "a document is registered under an absolute URI without a fragment, not \"{uri}\""
            )));
        }
        if !matches!(doc, Value::Object(_) | Value::Bool(_)) {
            return Err(invalid(format!(
                "the document registered as \"{uri}\" is not a schema (an object or a boolean)"
            )));
        }
        if let Some(id) = declared_id(&doc) {
            let abs = resolve_uri(base, id);
            let declared = split_fragment(&abs).0;
            if declared != base {
                return Err(invalid(format!(
                    "the document registered as \"{base}\" declares the $id \"{declared}\""
                )));
            }
        }
        self.docs.insert(base.to_string(), doc);
        Ok(())
    }

    /// Registers `doc` under its own `$id`, which must be an absolute URI;
    /// returns that URI.
    pub fn insert_by_id(&mut self, doc: Value) -> Result<String, SchemaError> {
        let Some(id) = declared_id(&doc) else {
            return Err(SchemaError::Invalid {
                pointer: Pointer::root(),
                detail: "a document registered by its $id has none".into(),
            });
        };
        let uri = split_fragment(id).0.to_string();
        self.insert(&uri, doc)?;
        Ok(uri)
    }

    /// The registered URIs.
    pub fn uris(&self) -> impl Iterator<Item = &str> {
        self.docs.keys().map(String::as_str)
    }

    /// Whether no document is registered.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// `schema` with every document it reaches embedded ([`bundle`]): the
    /// value to compile.
    pub fn bundle(&self, schema: &Value) -> Result<Value, SchemaError> {
        Ok(bundle(schema, self).into_owned())
    }
}

fn has_scheme(uri: &str) -> bool {
    match uri.find(':') {
        Some(i) if i > 0 => uri[..i]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)),
        _ => false,
    }
}

/// The compound document of `schema` and every registered document or
/// meta-schema its references reach (module docs). Borrowed when nothing
/// needs embedding.
pub fn bundle<'v>(schema: &'v Value, docs: &Documents) -> Cow<'v, Value> {
    let mut out = Cow::Borrowed(schema);
    let mut tried = BTreeSet::new();
    loop {
        let res = Resources::collect(&out);
        let missing: BTreeSet<String> = res
            .referenced()
            .iter()
            .filter(|u| !res.has_resource(u) && !tried.contains(*u))
            .cloned()
            .collect();
        if missing.is_empty() {
            return out;
        }
        for uri in missing {
            tried.insert(uri.clone());
            let Some(mut doc) = docs.docs.get(&uri).cloned().or_else(|| meta_schema(&uri)) else {
                continue;
            };
            let Value::Object(root) = out.to_mut() else {
                return out;
            };
            let defs = root
                .entry("$defs")
                .or_insert_with(|| Value::Object(Default::default()));
            let Value::Object(defs) = defs else {
                return out;
            };
            // The key and the `$id` are the URI the reference named (a
            // draft 4–7 meta-schema reached by its `https` spelling is
            // known by that one here).
            match &mut doc {
                Value::Object(m) => {
                    m.insert("$id".into(), Value::String(uri.clone()));
                }
                Value::Bool(b) => {
                    doc = if *b {
                        serde_json::json!({"$id": uri})
                    } else {
                        serde_json::json!({"$id": uri, "not": {}})
                    };
                }
                _ => {}
            }
            defs.insert(uri, doc);
        }
    }
}

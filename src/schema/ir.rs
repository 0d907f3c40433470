//! # Schema IR: `serde_json::Value` → typed schema
//!
//! [`Document`] owns the schema document and parses sub-schemas into
//! [`Schema`] on demand (a `$defs` entry nobody references is never parsed,
//! so its keywords cannot fail the compile). Parsing classifies every keyword:
//!
//! - *enforced*: parsed into a typed field of [`Node`];
//! - *annotation* (`title`, `description`, `default`, `examples`, `x-*`, ...):
//!   dropped silently;
//! - *unsupported* (`unevaluatedProperties`, `$dynamicRef`, ...):
//!   [`SchemaError::Unsupported`], or a warning in lenient mode (`not`,
//!   `if`/`then`/`else`, dependencies, `contains`, `propertyNames` and
//!   `uniqueItems` are parsed into fields and lowered by the generator);
//! - *unknown* (no draft defines it): [`SchemaError::Unknown`], or a warning
//!   with [`SchemaOptions::allow_unknown_keywords`] (the JSON Schema spec
//!   itself treats unknown keywords as annotations). Near-misses of real
//!   keywords (`maxlength`, `additonalProperties`) stay errors, except in
//!   compliant mode, which reads the schema as validators do and ignores
//!   every unknown keyword with a warning.
//!
//! Both draft 2020-12 and draft-04/06/07 spellings are read: `definitions`,
//! `id`, boolean `exclusiveMinimum`, array-form `items` with
//! `additionalItems`.
//!
//! `$ref` stays symbolic ([`Schema::Ref`], a JSON Pointer into the document)
//! so that the regex stage can count recursion. [`merge`] intersects two nodes
//! (the meaning of `allOf`); it never widens either side.

use super::numeric::{Bound, Dec};
use super::{Pointer, SchemaError, SchemaOptions, SchemaWarning};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

mod keywords;
mod merge;
pub(crate) mod resources;
mod unevaluated;
use keywords::*;
pub use merge::{json_eq, merge};
use merge::{lower_hi, raise_lo};
use resources::{Resources, Scope};

/// A set of JSON types. `NUMBER` includes the integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Types(pub u8);

impl Types {
    pub const NULL: Types = Types(1);
    pub const BOOLEAN: Types = Types(2);
    pub const INTEGER: Types = Types(4);
    pub const NUMBER: Types = Types(8);
    pub const STRING: Types = Types(16);
    pub const ARRAY: Types = Types(32);
    pub const OBJECT: Types = Types(64);
    pub const ALL: Types = Types(127);
    pub const NONE: Types = Types(0);

    pub fn has(self, t: Types) -> bool {
        self.0 & t.0 != 0
    }
    pub fn union(self, t: Types) -> Types {
        Types(self.0 | t.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Set intersection, with integer ⊂ number.
    pub fn intersect(self, o: Types) -> Types {
        let mut bits = self.0 & o.0 & !(Types::INTEGER.0 | Types::NUMBER.0);
        let num = |t: Types| {
            if t.has(Types::NUMBER) {
                2
            } else if t.has(Types::INTEGER) {
                1
            } else {
                0
            }
        };
        match num(self).min(num(o)) {
            2 => bits |= Types::NUMBER.0,
            1 => bits |= Types::INTEGER.0,
            _ => {}
        }
        Types(bits)
    }
    /// Whether a number type (integer or number) is present.
    pub fn has_numeric(self) -> bool {
        self.has(Types::INTEGER) || self.has(Types::NUMBER)
    }
    /// `self` without the types a `not: {type}` excludes. Excluding
    /// `integer` removes all numbers (the non-integers alone cannot be
    /// described: a sound narrowing).
    pub(crate) fn minus_not(self, not: Types) -> Types {
        let mut bits = self.0 & !not.0;
        if not.has_numeric() {
            bits &= !(Types::INTEGER.0 | Types::NUMBER.0);
        }
        Types(bits)
    }
    /// Whether `v` has one of these types (a number with no fraction is an
    /// integer, and every number a number).
    pub(crate) fn admits(self, v: &Value) -> bool {
        match v {
            Value::Null => self.has(Types::NULL),
            Value::Bool(_) => self.has(Types::BOOLEAN),
            Value::Number(_) => {
                self.has(Types::NUMBER)
                    || (self.has(Types::INTEGER) && Types::of(v) == Types::INTEGER)
            }
            Value::String(_) => self.has(Types::STRING),
            Value::Array(_) => self.has(Types::ARRAY),
            Value::Object(_) => self.has(Types::OBJECT),
        }
    }
    fn from_name(s: &str) -> Option<Types> {
        Some(match s {
            "null" => Types::NULL,
            "boolean" => Types::BOOLEAN,
            "integer" => Types::INTEGER,
            "number" => Types::NUMBER,
            "string" => Types::STRING,
            "array" => Types::ARRAY,
            "object" => Types::OBJECT,
            _ => return None,
        })
    }
    /// The type of a JSON value (integers as `INTEGER`).
    pub fn of(v: &Value) -> Types {
        match v {
            Value::Null => Types::NULL,
            Value::Bool(_) => Types::BOOLEAN,
            Value::Number(n) => {
                if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                    Types::INTEGER
                } else {
                    Types::NUMBER
                }
            }
            Value::String(_) => Types::STRING,
            Value::Array(_) => Types::ARRAY,
            Value::Object(_) => Types::OBJECT,
        }
    }
}

/// A (sub-)schema.
#[derive(Clone, Debug)]
pub enum Schema {
    /// `true` (anything) or `false` (nothing).
    Bool(bool),
    /// A local reference, resolved by the regex stage.
    Ref { target: String, at: Pointer },
    /// A schema object.
    Node(Box<Node>),
}

/// A pattern or format with the pointer of the schema it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub at: Pointer,
}

/// `if` / `then` / `else` of one schema object.
#[derive(Clone, Debug)]
pub struct Conditional {
    pub cond: Schema,
    pub then: Option<Schema>,
    pub otherwise: Option<Schema>,
    pub at: Pointer,
}

/// `contains` / `minContains` / `maxContains` of one schema object.
#[derive(Clone, Debug)]
pub struct Contains {
    pub schema: Schema,
    pub min: u64,
    pub max: Option<u64>,
    pub at: Pointer,
}

/// "The object has at least one key that is not one of `names`, matches
/// none of `patterns` (and matches `within`, and whose name fails
/// `name_out`, where set), and whose value validates against `value`": the
/// complement of `additionalProperties` (and, with `within`, of one
/// `patternProperties` entry; with `name_out`, of `propertyNames`; see
/// `regex/logic.rs`). Resolved against a node whose keys are closed (a
/// finite declared set) into an `anyOf` of required keys; against open keys
/// with one witness key added (see `schema/witness.rs`).
#[derive(Clone, Debug)]
pub struct SomeExtra {
    pub names: Vec<String>,
    pub patterns: Vec<Located<String>>,
    pub within: Option<Located<String>>,
    pub name_out: Option<Schema>,
    pub value: Schema,
    pub at: Pointer,
}

/// A schema object with its keywords typed. Absent keywords are `None`/empty.
#[derive(Clone, Debug, Default)]
pub struct Node {
    pub at: Pointer,
    pub types: Option<Types>,
    pub enumeration: Option<Vec<Value>>,
    // strings
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub patterns: Vec<Located<String>>,
    pub formats: Vec<Located<String>>,
    // numbers
    pub minimum: Option<Bound>,
    pub maximum: Option<Bound>,
    pub multiple_of: Option<Located<Dec>>,
    // arrays
    pub prefix_items: Option<Vec<Schema>>,
    pub items: Option<Schema>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    // objects
    pub properties: Vec<(String, Schema)>,
    pub required: Vec<String>,
    pub additional: Option<Schema>,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    /// Bounds from an integer `format` (`int32`, `uint8`, ...), folded into
    /// `minimum`/`maximum` while parsing.
    pub format_bounds: Option<(Option<Bound>, Option<Bound>)>,
    /// `patternProperties` entries (pattern, schema).
    pub pattern_properties: Vec<(Located<String>, Schema)>,
    // `not` in the forms the compiler can enforce
    /// `not: {}` / `not: true`: nothing validates.
    pub never: bool,
    /// `not: {type: ...}`: these types are excluded.
    pub not_types: Types,
    /// `not: {required: [k, ...]}` (narrowed to: the first key never appears).
    pub forbid_keys: Vec<String>,
    // the boolean algebra (see `logic.rs`): lowered into `any_of` groups
    // before generation
    /// General `not` sub-schemas (the forms above excepted).
    pub nots: Vec<Schema>,
    /// `if` / `then` / `else` (then and else `None` when absent).
    pub conditionals: Vec<Conditional>,
    /// `dependentRequired` and the array form of `dependencies`.
    pub dependent_required: Vec<(String, Vec<String>)>,
    /// `dependentSchemas` and the schema form of `dependencies`.
    pub dependent_schemas: Vec<(String, Schema)>,
    /// Values excluded (the complement of an `enum`/`const`).
    pub not_values: Vec<Value>,
    /// Patterns the string must *not* match (the complement of `pattern`).
    pub not_patterns: Vec<Located<String>>,
    /// Numbers only with a fractional part (the complement of `integer`
    /// among numbers).
    pub fractional: bool,
    /// Integers that are not multiples of these (the complement of an
    /// integer `multipleOf` among the integers, see `regex/residue.rs`).
    pub not_multiple_of: Vec<Located<Dec>>,
    /// `contains` with `minContains` (default 1) and `maxContains`.
    pub contains: Vec<Contains>,
    /// `propertyNames`.
    pub property_names: Vec<Schema>,
    /// `uniqueItems: true` (see `Gen::array_unique`).
    pub unique_items: bool,
    /// Extra keys that must exist (the complement of
    /// `additionalProperties`).
    pub some_extra: Vec<SomeExtra>,
    // applicators
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Vec<Schema>>,
    pub one_of: Vec<Located<Vec<Schema>>>,
}

impl Node {
    /// Whether any string keyword is present.
    pub fn has_string_keywords(&self) -> bool {
        self.min_length.is_some()
            || self.max_length.is_some()
            || !self.patterns.is_empty()
            || !self.formats.is_empty()
            || !self.not_patterns.is_empty()
    }
    pub fn has_number_keywords(&self) -> bool {
        self.minimum.is_some()
            || self.maximum.is_some()
            || self.multiple_of.is_some()
            || !self.not_multiple_of.is_empty()
            || self.fractional
    }
    pub fn has_array_keywords(&self) -> bool {
        self.prefix_items.is_some()
            || self.items.is_some()
            || self.min_items.is_some()
            || self.max_items.is_some()
            || !self.contains.is_empty()
            || self.unique_items
    }
    pub fn has_object_keywords(&self) -> bool {
        !self.properties.is_empty()
            || !self.required.is_empty()
            || self.additional.is_some()
            || self.min_properties.is_some()
            || self.max_properties.is_some()
            || !self.pattern_properties.is_empty()
            || !self.forbid_keys.is_empty()
            || !self.dependent_required.is_empty()
            || !self.dependent_schemas.is_empty()
            || !self.property_names.is_empty()
            || !self.some_extra.is_empty()
    }
    /// Types implied by the keywords present (for strict-mode inference).
    pub fn keyword_types(&self) -> Types {
        let mut t = Types::NONE;
        if self.has_string_keywords() {
            t = t.union(Types::STRING);
        }
        if self.has_number_keywords() {
            t = t.union(Types::NUMBER);
        }
        if self.has_array_keywords() {
            t = t.union(Types::ARRAY);
        }
        if self.has_object_keywords() {
            t = t.union(Types::OBJECT);
        }
        t
    }
    /// A node with no constraint at all.
    pub fn is_trivial(&self) -> bool {
        !self.never
            && self.not_types.is_empty()
            && self.types.is_none()
            && self.enumeration.is_none()
            && self.keyword_types().is_empty()
            && self.all_of.is_empty()
            && self.any_of.is_empty()
            && self.one_of.is_empty()
            && self.nots.is_empty()
            && self.conditionals.is_empty()
            && self.not_values.is_empty()
    }
}

/// The schema document, with parsed sub-schemas cached by pointer.
pub struct Document<'a> {
    root: &'a Value,
    opts: &'a SchemaOptions,
    cache: RefCell<HashMap<String, Rc<Schema>>>,
    resources: Resources,
    /// The dynamic scope of the schema being parsed (innermost last); kept
    /// only when some `$dynamicAnchor` name is defined more than once.
    scope: RefCell<Vec<Rc<Scope>>>,
    pub warnings: RefCell<Vec<SchemaWarning>>,
}

/// Separates a pointer from its dynamic scope in a reference key
/// ([`Document::get`]); a JSON Pointer never holds it.
const SCOPE_SEP: char = '\u{3}';

/// The JSON Pointer of a reference key ([`Document::get`]), its dynamic
/// scope aside.
pub fn key_pointer(key: &str) -> &str {
    key.split(SCOPE_SEP).next().unwrap_or(key)
}

/// A scope in a reference key: `name=pointer` pairs, `\u{1}`-separated.
fn encode_scope(scope: &Scope) -> String {
    let parts: Vec<String> = scope.iter().map(|(k, v)| format!("{k}\u{2}{v}")).collect();
    parts.join("\u{1}")
}

fn decode_scope(text: &str) -> Scope {
    text.split('\u{1}')
        .filter_map(|p| p.split_once('\u{2}'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn as_count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

fn as_dec(v: &Value) -> Option<Dec> {
    match v {
        Value::Number(n) => Dec::parse(&n.to_string()),
        _ => None,
    }
}

impl<'a> Document<'a> {
    pub fn new(root: &'a Value, opts: &'a SchemaOptions) -> Document<'a> {
        Document {
            root,
            opts,
            cache: RefCell::new(HashMap::new()),
            resources: Resources::collect(root),
            scope: RefCell::new(Vec::new()),
            warnings: RefCell::new(Vec::new()),
        }
    }

    pub fn opts(&self) -> &SchemaOptions {
        self.opts
    }

    /// Records an error as a warning when the options allow it, else returns it.
    pub fn soft(&self, e: SchemaError, allow: bool) -> Result<(), SchemaError> {
        if allow && e.is_downgradable() {
            self.warnings.borrow_mut().push(SchemaWarning {
                pointer: e.pointer().clone(),
                message: match &e {
                    SchemaError::Unsupported { keyword, .. } => {
                        format!("unsupported keyword \"{keyword}\" ignored")
                    }
                    SchemaError::Unknown { keyword, .. } => {
                        format!("unknown keyword \"{keyword}\" ignored")
                    }
                    other => format!("{other}; ignored"),
                },
            });
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Adds a warning (a documented narrowing).
    pub fn warn(&self, at: &Pointer, message: String) {
        self.warnings.borrow_mut().push(SchemaWarning {
            pointer: at.clone(),
            message,
        });
    }

    /// The root schema.
    pub fn root(&self) -> Result<Rc<Schema>, SchemaError> {
        self.get("")
    }

    /// The schema at a reference key (parsed once): a JSON Pointer, and
    /// where the document's `$dynamicRef`s can depend on the dynamic scope,
    /// the scope the reference enters it with (`ref_key`): one copy
    /// of a subschema per distinct scope, a finite number.
    pub fn get(&self, key: &str) -> Result<Rc<Schema>, SchemaError> {
        if let Some(s) = self.cache.borrow().get(key) {
            return Ok(s.clone());
        }
        let (target, scope) = match key.split_once(SCOPE_SEP) {
            Some((t, sc)) => (t, decode_scope(sc)),
            None => (key, Scope::new()),
        };
        let at = Pointer(target.to_string());
        let v = if target.is_empty() {
            Some(self.root)
        } else {
            self.root.pointer(target)
        };
        let Some(v) = v else {
            return Err(SchemaError::Ref {
                reference: format!("#{target}"),
                pointer: at,
            });
        };
        let dynamic = self.resources.has_dynamic_scope();
        if dynamic {
            let entered = self.resources.enter(&scope, target);
            self.scope.borrow_mut().push(Rc::new(entered));
        }
        let parsed = self.parse(v, &at);
        if dynamic {
            self.scope.borrow_mut().pop();
        }
        let s = Rc::new(parsed?);
        self.cache.borrow_mut().insert(key.to_string(), s.clone());
        Ok(s)
    }

    /// The key of a reference to `target` made in the current dynamic
    /// scope: the pointer, and (where the scope matters) the scope after
    /// entering the target's resource.
    fn ref_key(&self, target: String) -> String {
        if !self.resources.has_dynamic_scope() {
            return target;
        }
        let cur = self.scope.borrow().last().cloned().unwrap_or_default();
        let entered = self.resources.enter(&cur, &target);
        if entered.is_empty() {
            return target;
        }
        format!("{target}{SCOPE_SEP}{}", encode_scope(&entered))
    }

    /// Resolves a `$ref` string to a pointer into this document
    /// ([`Resources::resolve`]: by `$id`, `$anchor`, relative or absolute
    /// URI; nothing is fetched).
    fn ref_target(&self, r: &str, at: &Pointer) -> Result<Option<String>, SchemaError> {
        match self.resources.resolve(r, at.as_str(), self.root) {
            Some(p) => Ok(Some(p)),
            None => Err(SchemaError::Ref {
                reference: r.into(),
                pointer: at.clone(),
            }),
        }
    }

    fn sub(&self, v: &Value, at: Pointer) -> Result<Schema, SchemaError> {
        self.parse(v, &at)
    }

    fn schema_list(&self, v: &Value, at: &Pointer, kw: &str) -> Result<Vec<Schema>, SchemaError> {
        let Value::Array(a) = v else {
            return Err(SchemaError::Invalid {
                pointer: at.clone(),
                detail: format!("\"{kw}\" must be an array of schemas"),
            });
        };
        if a.is_empty() {
            return Err(SchemaError::Invalid {
                pointer: at.clone(),
                detail: format!("\"{kw}\" must not be empty"),
            });
        }
        let base = at.push(kw);
        a.iter()
            .enumerate()
            .map(|(i, s)| self.sub(s, base.push_index(i)))
            .collect()
    }

    /// Parses one schema value. A subschema with its own `$id` is a
    /// resource entered into the dynamic scope.
    pub fn parse(&self, v: &Value, at: &Pointer) -> Result<Schema, SchemaError> {
        let nested = self.resources.has_dynamic_scope()
            && !at.as_str().is_empty()
            && v.get("$id")
                .is_some_and(|id| id.as_str().is_some_and(|i| !i.starts_with('#')));
        if !nested {
            return self.parse_here(v, at);
        }
        let cur = self.scope.borrow().last().cloned().unwrap_or_default();
        let entered = self.resources.enter(&cur, at.as_str());
        self.scope.borrow_mut().push(Rc::new(entered));
        let r = self.parse_here(v, at);
        self.scope.borrow_mut().pop();
        r
    }

    fn parse_here(&self, v: &Value, at: &Pointer) -> Result<Schema, SchemaError> {
        let m = match v {
            Value::Bool(b) => return Ok(Schema::Bool(*b)),
            Value::Object(m) => m,
            _ => {
                return Err(SchemaError::Invalid {
                    pointer: at.clone(),
                    detail: "a schema must be an object or a boolean".into(),
                })
            }
        };
        let opts = self.opts;
        // unevaluated*: rewritten into the keywords they amount to where the
        // evaluated sets are known statically (`ir/unevaluated.rs`).
        if m.contains_key("unevaluatedProperties") || m.contains_key("unevaluatedItems") {
            match unevaluated::rewrite(&self.resources, self.root, m, at.as_str()) {
                Ok(v) => return self.parse_here(&v, at),
                Err((keyword, detail)) => self.soft(
                    SchemaError::UnsupportedValue {
                        what: keyword.into(),
                        pointer: at.clone(),
                        detail,
                    },
                    opts.lenient,
                )?,
            }
        }
        let mut n = Node {
            at: at.clone(),
            ..Default::default()
        };
        let invalid = |detail: String| SchemaError::Invalid {
            pointer: at.clone(),
            detail,
        };
        let count = |kw: &str| -> Result<Option<u64>, SchemaError> {
            match m.get(kw) {
                None => Ok(None),
                Some(v) => as_count(v)
                    .map(Some)
                    .ok_or_else(|| invalid(format!("\"{kw}\" must be a non-negative integer"))),
            }
        };
        for (k, val) in m {
            let k = k.as_str();
            if ENFORCED.contains(&k) || ANNOTATIONS.contains(&k) {
                continue;
            }
            if k.starts_with("x-") {
                continue; // vendor extension (OpenAPI convention): annotation
            }
            if k == "not" || k == "patternProperties" || k == "$dynamicRef" || k == "$recursiveRef"
            {
                continue; // parsed below
            }
            if UNSUPPORTED.contains(&k) {
                self.soft(
                    SchemaError::Unsupported {
                        keyword: k.into(),
                        pointer: at.clone(),
                    },
                    opts.lenient,
                )?;
                let _ = val;
                continue;
            }
            // Compliant mode reads a schema as validators do: a keyword no
            // draft defines changes nothing, near-misses included (a
            // validator ignores `additionalproperties` too), with a
            // warning. Strict generation keeps unknown keywords errors
            // (near-misses always, others unless `allow_unknown_keywords`).
            let allow = opts.lenient
                || opts.mode == super::JsonMode::Compliant
                || (opts.allow_unknown_keywords && near_miss(k).is_none());
            self.soft(
                SchemaError::Unknown {
                    keyword: k.into(),
                    pointer: at.clone(),
                },
                allow,
            )?;
        }

        // $ref: siblings apply too (2020-12); for older drafts that narrows.
        if let Some(r) = m.get("$ref") {
            let Value::String(r) = r else {
                return Err(invalid("\"$ref\" must be a string".into()));
            };
            match self.ref_target(r, at) {
                Ok(Some(target)) => n.all_of.push(Schema::Ref {
                    target: self.ref_key(target),
                    at: at.clone(),
                }),
                Ok(None) => {}
                Err(e) => self.soft(e, opts.lenient)?,
            }
        }
        // $dynamicRef: the target the dynamic scope picks (one copy of the
        // target per scope). $recursiveRef (2019-09): where it resolves
        // statically, a `$ref`.
        if let Some(r) = m.get("$dynamicRef") {
            let Value::String(r) = r else {
                return Err(invalid("\"$dynamicRef\" must be a string".into()));
            };
            let scope = self.scope.borrow().last().cloned().unwrap_or_default();
            match self
                .resources
                .resolve_dynamic(r, at.as_str(), self.root, &scope)
            {
                Some(target) => n.all_of.push(Schema::Ref {
                    target: self.ref_key(target),
                    at: at.clone(),
                }),
                None => self.soft(
                    SchemaError::Ref {
                        reference: r.clone(),
                        pointer: at.clone(),
                    },
                    opts.lenient,
                )?,
            }
        }
        if let Some(r) = m.get("$recursiveRef") {
            let Value::String(r) = r else {
                return Err(invalid("\"$recursiveRef\" must be a string".into()));
            };
            match self.resources.resolve_recursive(r, at.as_str(), self.root) {
                Ok(Some(target)) => n.all_of.push(Schema::Ref {
                    target: self.ref_key(target),
                    at: at.clone(),
                }),
                Ok(None) => self.soft(
                    SchemaError::Ref {
                        reference: r.clone(),
                        pointer: at.clone(),
                    },
                    opts.lenient,
                )?,
                Err(detail) => self.soft(
                    SchemaError::UnsupportedValue {
                        what: "$recursiveRef".into(),
                        pointer: at.clone(),
                        detail,
                    },
                    opts.lenient,
                )?,
            }
        }

        // type
        if let Some(t) = m.get("type") {
            let names: Vec<&Value> = match t {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            let mut types = Types::NONE;
            for name in names {
                match name.as_str().and_then(Types::from_name) {
                    Some(t) => types = types.union(t),
                    None => {
                        // draft-03 schema-valued types, "any", or a typo.
                        if name.as_str() == Some("any") {
                            types = Types::ALL;
                        } else {
                            return Err(SchemaError::UnsupportedValue {
                                what: "type".into(),
                                pointer: at.clone(),
                                detail: format!("unknown type {name}"),
                            });
                        }
                    }
                }
            }
            n.types = Some(types);
        }

        // enum / const
        if let Some(e) = m.get("enum") {
            let Value::Array(a) = e else {
                return Err(invalid("\"enum\" must be an array".into()));
            };
            n.enumeration = Some(a.clone());
        }
        if let Some(c) = m.get("const") {
            n.enumeration = Some(match n.enumeration.take() {
                None => vec![c.clone()],
                Some(list) => list.into_iter().filter(|v| json_eq(v, c)).collect(),
            });
        }

        // strings
        n.min_length = count("minLength")?;
        n.max_length = count("maxLength")?;
        if let Some(p) = m.get("pattern") {
            let Value::String(p) = p else {
                return Err(invalid("\"pattern\" must be a string".into()));
            };
            n.patterns.push(Located {
                value: p.clone(),
                at: at.clone(),
            });
        }
        if let Some(f) = m.get("format") {
            let Value::String(f) = f else {
                return Err(invalid("\"format\" must be a string".into()));
            };
            if let Some((lo, hi)) = numeric_format(f) {
                // OpenAPI/schemars integer formats: enforced as bounds on
                // numbers (validators ignore them: a sound narrowing).
                let b = |s: &str| {
                    Dec::parse(s).map(|value| Bound {
                        value,
                        exclusive: false,
                    })
                };
                n.format_bounds = Some((lo.and_then(b), hi.and_then(b)));
            } else if super::formats::SUPPORTED.contains(&f.as_str()) {
                n.formats.push(Located {
                    value: f.clone(),
                    at: at.clone(),
                });
            } else {
                let defined = super::formats::DEFINED_UNSUPPORTED.contains(&f.as_str());
                let allow = opts.lenient || (opts.allow_unknown_keywords && !defined);
                self.soft(
                    SchemaError::UnsupportedValue {
                        what: "format".into(),
                        pointer: at.clone(),
                        detail: format!("unknown format \"{f}\""),
                    },
                    allow,
                )?;
            }
        }

        // numbers (draft-04 boolean exclusives modify minimum/maximum)
        let num = |kw: &str| -> Result<Option<Dec>, SchemaError> {
            match m.get(kw) {
                None => Ok(None),
                Some(Value::Bool(_)) => Ok(None),
                Some(v) => as_dec(v)
                    .map(Some)
                    .ok_or_else(|| invalid(format!("\"{kw}\" must be a number"))),
            }
        };
        let excl_flag = |kw: &str| matches!(m.get(kw), Some(Value::Bool(true)));
        let mut lo = num("minimum")?.map(|value| Bound {
            value,
            exclusive: excl_flag("exclusiveMinimum"),
        });
        let mut hi = num("maximum")?.map(|value| Bound {
            value,
            exclusive: excl_flag("exclusiveMaximum"),
        });
        if let Some(x) = num("exclusiveMinimum")? {
            let b = Bound {
                value: x,
                exclusive: true,
            };
            raise_lo(&mut lo, b);
        }
        if let Some(x) = num("exclusiveMaximum")? {
            let b = Bound {
                value: x,
                exclusive: true,
            };
            lower_hi(&mut hi, b);
        }
        if let Some((flo, fhi)) = n.format_bounds.clone() {
            if let Some(f) = flo {
                raise_lo(&mut lo, f);
            }
            if let Some(f) = fhi {
                lower_hi(&mut hi, f);
            }
        }
        n.minimum = lo;
        n.maximum = hi;
        if let Some(d) = num("multipleOf")? {
            if d.neg || d.is_zero() {
                return Err(invalid("\"multipleOf\" must be greater than 0".into()));
            }
            n.multiple_of = Some(Located {
                value: d,
                at: at.clone(),
            });
        }

        // arrays
        let items_is_array = matches!(m.get("items"), Some(Value::Array(_)));
        if let Some(p) = m.get("prefixItems") {
            n.prefix_items = Some(self.schema_list_allow_empty(p, at, "prefixItems")?);
        }
        if let Some(it) = m.get("items") {
            if let Value::Array(_) = it {
                // draft ≤ 2019-09 tuple form
                n.prefix_items = Some(self.schema_list_allow_empty(it, at, "items")?);
                if let Some(ai) = m.get("additionalItems") {
                    n.items = Some(self.sub(ai, at.push("additionalItems"))?);
                }
            } else {
                n.items = Some(self.sub(it, at.push("items"))?);
            }
        }
        let _ = items_is_array;
        n.min_items = count("minItems")?;
        n.max_items = count("maxItems")?;
        match m.get("uniqueItems") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => {
                // Trivially unique when at most one item can be present.
                if n.max_items.is_none_or(|x| x > 1) {
                    n.unique_items = true;
                }
            }
        }

        // objects
        if let Some(p) = m.get("properties") {
            let Value::Object(props) = p else {
                return Err(invalid("\"properties\" must be an object".into()));
            };
            let base = at.push("properties");
            for (name, s) in props {
                n.properties
                    .push((name.clone(), self.sub(s, base.push(name))?));
            }
        }
        match m.get("required") {
            None => {}
            Some(Value::Array(a)) => {
                for r in a {
                    match r {
                        Value::String(s) => {
                            if !n.required.contains(s) {
                                n.required.push(s.clone())
                            }
                        }
                        _ => return Err(invalid("\"required\" must list strings".into())),
                    }
                }
            }
            Some(Value::Bool(_)) => {
                // draft-03 per-property `required: true`
                self.soft(
                    SchemaError::UnsupportedValue {
                        what: "required".into(),
                        pointer: at.clone(),
                        detail: "boolean \"required\" (draft-03)".into(),
                    },
                    opts.lenient,
                )?;
            }
            Some(_) => return Err(invalid("\"required\" must be an array".into())),
        }
        if let Some(a) = m.get("additionalProperties") {
            n.additional = Some(self.sub(a, at.push("additionalProperties"))?);
        }
        n.min_properties = count("minProperties")?;
        n.max_properties = count("maxProperties")?;

        if let Some(pp) = m.get("patternProperties") {
            let Value::Object(pp) = pp else {
                return Err(invalid("\"patternProperties\" must be an object".into()));
            };
            let base = at.push("patternProperties");
            for (p, s) in pp {
                n.pattern_properties.push((
                    Located {
                        value: p.clone(),
                        at: at.clone(),
                    },
                    self.sub(s, base.push(p))?,
                ));
            }
        }
        if let Some(nv) = m.get("not") {
            if !simple_not(nv, &mut n) {
                n.nots.push(self.sub(nv, at.push("not"))?);
            }
        }
        if let Some(c) = m.get("if") {
            let then = m
                .get("then")
                .map(|t| self.sub(t, at.push("then")))
                .transpose()?;
            let otherwise = m
                .get("else")
                .map(|t| self.sub(t, at.push("else")))
                .transpose()?;
            if then.is_some() || otherwise.is_some() {
                n.conditionals.push(Conditional {
                    cond: self.sub(c, at.push("if"))?,
                    then,
                    otherwise,
                    at: at.push("if"),
                });
            }
        }
        // `dependencies` (draft 4-7): arrays are dependentRequired, schemas
        // dependentSchemas.
        for kw in ["dependentRequired", "dependentSchemas", "dependencies"] {
            let Some(d) = m.get(kw) else { continue };
            let Value::Object(d) = d else {
                return Err(invalid(format!("\"{kw}\" must be an object")));
            };
            let base = at.push(kw);
            for (k, v) in d {
                match v {
                    Value::Array(a) if kw != "dependentSchemas" => {
                        let mut keys = Vec::new();
                        for x in a {
                            match x.as_str() {
                                Some(x) => keys.push(x.to_string()),
                                None => {
                                    return Err(invalid(format!(
                                        "\"{kw}\" must list property names"
                                    )))
                                }
                            }
                        }
                        n.dependent_required.push((k.clone(), keys));
                    }
                    _ if kw != "dependentRequired" => {
                        n.dependent_schemas
                            .push((k.clone(), self.sub(v, base.push(k))?));
                    }
                    _ => {
                        return Err(invalid(format!(
                            "\"{kw}\" must map names to arrays of names"
                        )))
                    }
                }
            }
        }
        if let Some(c) = m.get("contains") {
            n.contains.push(Contains {
                schema: self.sub(c, at.push("contains"))?,
                min: count("minContains")?.unwrap_or(1),
                max: count("maxContains")?,
                at: at.push("contains"),
            });
        }
        if let Some(p) = m.get("propertyNames") {
            n.property_names
                .push(self.sub(p, at.push("propertyNames"))?);
        }

        // applicators
        if let Some(a) = m.get("allOf") {
            let list = self.schema_list(a, at, "allOf")?;
            n.all_of.extend(list);
        }
        if let Some(a) = m.get("anyOf") {
            n.any_of.push(self.schema_list(a, at, "anyOf")?);
        }
        if let Some(a) = m.get("oneOf") {
            n.one_of.push(Located {
                value: self.schema_list(a, at, "oneOf")?,
                at: at.clone(),
            });
        }
        Ok(Schema::Node(Box::new(n)))
    }

    fn schema_list_allow_empty(
        &self,
        v: &Value,
        at: &Pointer,
        kw: &str,
    ) -> Result<Vec<Schema>, SchemaError> {
        match v {
            Value::Array(a) if a.is_empty() => Ok(Vec::new()),
            _ => self.schema_list(v, at, kw),
        }
    }
}

/// Whether the (ECMA) pattern matches the text; `None` if it cannot compile.
pub fn pattern_matches(pattern: &str, text: &str) -> Option<bool> {
    super::pattern::is_match(pattern, text)
}

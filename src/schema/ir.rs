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

mod document;
mod keywords;
mod merge;
pub(crate) mod resources;
mod unevaluated;
use document::as_dec;
pub use document::{key_pointer, Document};
pub use merge::{json_eq, merge};

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
    /// A schema object, shared: the generator copies nodes to merge and
    /// split them (`allOf`, `$ref`, the `oneOf` proof), and a copy of a
    /// node then shares its subschemas instead of copying their trees.
    Node(std::sync::Arc<Node>),
}

/// Structure: two schemas are equal when they are the same boolean, the
/// same reference (by its target, not followed), or nodes with equal
/// keywords (a shared node is equal to itself without a look inside).
/// Equal schemas have the same language; the generator memoises work per
/// node with it ([`Node`]'s `PartialEq`).
impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        match (self, other) {
            (Schema::Bool(a), Schema::Bool(b)) => a == b,
            (Schema::Ref { target: a, .. }, Schema::Ref { target: b, .. }) => a == b,
            (Schema::Node(a), Schema::Node(b)) => std::sync::Arc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }
}

/// A pattern or format with the pointer of the schema it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub at: Pointer,
}

/// `if` / `then` / `else` of one schema object.
#[derive(Clone, Debug, PartialEq)]
pub struct Conditional {
    pub cond: Schema,
    pub then: Option<Schema>,
    pub otherwise: Option<Schema>,
    pub at: Pointer,
}

/// `contains` / `minContains` / `maxContains` of one schema object.
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
pub struct SomeExtra {
    pub names: Vec<String>,
    pub patterns: Vec<Located<String>>,
    pub within: Option<Located<String>>,
    pub name_out: Option<Schema>,
    pub value: Schema,
    pub at: Pointer,
}

/// A schema object with its keywords typed. Absent keywords are `None`/empty.
#[derive(Clone, Debug, Default, PartialEq)]
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

/// Whether the (ECMA) pattern matches the text; `None` if it cannot compile.
pub fn pattern_matches(pattern: &str, text: &str) -> Option<bool> {
    super::pattern::is_match(pattern, text)
}

//! [`Document`]: the schema document, parsing sub-schemas into [`Schema`]
//! on demand and caching them by reference key.

use super::keywords::*;
use super::merge::{lower_hi, raise_lo};
use super::resources::{Resources, Scope};
use super::*;

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
    /// Schemas whose `uniqueItems` the matcher checks at run time
    /// ([`crate::schema::unique_sites`]).
    unique_checked: std::collections::HashSet<String>,
    /// Why the others are not.
    unique_refused: HashMap<String, &'static str>,
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

pub(super) fn as_count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

pub(super) fn as_dec(v: &Value) -> Option<Dec> {
    match v {
        Value::Number(n) => Dec::parse(&n.to_string()),
        _ => None,
    }
}

impl<'a> Document<'a> {
    pub fn new(root: &'a Value, opts: &'a SchemaOptions) -> Document<'a> {
        let mut doc = Document {
            root,
            opts,
            cache: RefCell::new(HashMap::new()),
            resources: Resources::collect(root),
            scope: RefCell::new(Vec::new()),
            warnings: RefCell::new(Vec::new()),
            unique_checked: Default::default(),
            unique_refused: Default::default(),
        };
        if opts.unique_items_check {
            let sites = crate::schema::unique_sites::sites(root);
            doc.unique_checked = sites.checked;
            doc.unique_refused = sites.refused;
        }
        doc
    }

    /// Why the matcher cannot check the `uniqueItems` of the schema at
    /// `at` (when the compiler asked for the check at all).
    pub fn unique_refused_at(&self, at: &Pointer) -> Option<&'static str> {
        self.unique_refused.get(at.as_str()).copied()
    }

    /// Whether the matcher checks the `uniqueItems` of the schema at `at`.
    pub fn unique_checked_at(&self, at: &Pointer) -> bool {
        self.unique_checked.contains(at.as_str())
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
                || opts.mode == crate::schema::JsonMode::Compliant
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
            } else if crate::schema::formats::SUPPORTED.contains(&f.as_str()) {
                n.formats.push(Located {
                    value: f.clone(),
                    at: at.clone(),
                });
            } else {
                let defined = crate::schema::formats::DEFINED_UNSUPPORTED.contains(&f.as_str());
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
        Ok(Schema::Node(std::sync::Arc::new(n)))
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

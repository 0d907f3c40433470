//! # Leaves under the boolean algebra
//!
//! The generator's leaves for what [`logic`](super::logic) lowers to:
//! values other than an `enum`'s (`not_values`), non-integer numbers (the
//! complement of `integer`), objects under `propertyNames`, strings with
//! several patterns/formats or excluded patterns (product automata of
//! [`crate::dfa::algebra`]: intersection, and difference within the
//! canonical spellings so that subtracting spellings subtracts strings),
//! and `uniqueItems` over small finite item languages (every ordering of
//! distinct values; more listed values narrowed to the listed order; items
//! with no finite set of values an error). Each documents its bound or
//! narrowing.

use super::nodes::blank;
use super::*;
use crate::dfa::algebra::{self, AlgebraError, Op};
use crate::schema::numeric::Bound;
impl<'d, 'a> Gen<'d, 'a> {
    /// Numbers with a fractional part (never integral), written without an
    /// exponent, at most 6 + 9 digits; within bounds through a product
    /// automaton; with `multipleOf` none are offered (a sound narrowing,
    /// with a warning).
    pub(super) fn fractional_number(
        &mut self,
        n: &Node,
        types: Types,
    ) -> Result<Lang, SchemaError> {
        if !types.has(Types::NUMBER) {
            return Ok(None);
        }
        // At most 6 integer and 9 fraction digits: the nearest `f64` is
        // then never an integer (its spacing below 10^6 is ~1.2e-10), so
        // validators reading floats agree that it is not one.
        let frac = "-?(?:0|[1-9][0-9]{0,5})\\.[0-9]{0,8}[1-9]";
        if n.minimum.is_none() && n.maximum.is_none() && n.multiple_of.is_none() {
            return Ok(Some(frac.into()));
        }
        if n.multiple_of.is_none() {
            // Within bounds: the product with the decimal range.
            if let Some(range) = numeric::decimal_range(n.minimum.as_ref(), n.maximum.as_ref()) {
                return self.combine(&range, frac, Op::And, "non-integer numbers in range", &n.at);
            }
            return Ok(None);
        }
        self.doc.warn(
            &n.at,
            "non-integer numbers with multipleOf are not offered (complement of \"integer\")"
                .into(),
        );
        Ok(None)
    }

    /// Numbers that are multiples of a fractional `multipleOf` (`0.01`,
    /// `0.25`, `2.5`, ...), read as decimals: `x` is a multiple when
    /// `x / multipleOf` is an integer over the rationals, as the JSON
    /// Schema specification defines it and as MaskBench's labels read it
    /// (`10.99` is a multiple of `0.01`, `10.001` is not). Validators that
    /// divide in binary floating point disagree with the text and with
    /// each other (Python's `jsonschema` finds `0.07 / 0.01` = 7.000000000000001
    /// and rejects 0.07; the `jsonschema` crate accepts 0.07 but rejects
    /// 2.01 and every negative value); no regular language matches
    /// either, so the decimal reading is the one enforced. Plain decimal
    /// notation only (no exponent), integer part at most 15 digits, within
    /// bounds through a product automaton. A `multipleOf` whose digits are
    /// not a divisor of a power of ten (`0.3`) fails closed.
    pub(super) fn decimal_multiple_of(
        &mut self,
        n: &Node,
        integer_only: bool,
    ) -> Result<Lang, SchemaError> {
        let m = n.multiple_of.as_ref().expect("a multipleOf");
        let multiples = match numeric::decimal_multiples(&m.value, 64) {
            Ok(r) => r,
            Err(detail) => return self.soft_number(n, &detail),
        };
        let (lo, hi) = (n.minimum.as_ref(), n.maximum.as_ref());
        if let (Some(a), Some(b)) = (lo, hi) {
            if a.value > b.value {
                return Ok(None);
            }
        }
        let base = if integer_only {
            let (l, h) = numeric::integer_bounds(lo, hi);
            numeric::int_range(l.as_ref(), h.as_ref())
        } else if lo.is_none() && hi.is_none() {
            return Ok(Some(multiples.into()));
        } else {
            numeric::decimal_range(lo, hi)
        };
        let Some(base) = base else {
            return Ok(None);
        };
        self.combine(
            &base,
            &multiples,
            Op::And,
            "multipleOf within bounds",
            &m.at,
        )
    }

    /// A leaf whose values must differ from `n.not_values` (the complement
    /// of an `enum`): null and booleans are filtered, numbers split into
    /// the open intervals between the excluded ones, strings are the
    /// complement of the excluded spellings' trie. Narrowed (with a
    /// warning): strings with other string keywords when an excluded string
    /// satisfies them, arrays of an excluded array's length, non-empty
    /// excluded objects (then no object is offered).
    // Kept out of the recursive generator's frames (deep schemas).
    #[inline(never)]
    pub(super) fn leaf_excluding(
        &mut self,
        n: &Node,
        types: Types,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        let ex = &n.not_values;
        let mut base = n.clone();
        base.not_values.clear();
        let mut parts: Vec<Rx> = Vec::new();
        let mut rest = types.0;
        let drop = |rest: &mut u8, t: Types| *rest &= !t.0;
        if ex.iter().any(Value::is_null) {
            drop(&mut rest, Types::NULL);
        }
        let (t, f) = (
            ex.contains(&Value::Bool(true)),
            ex.contains(&Value::Bool(false)),
        );
        if Types(rest).has(Types::BOOLEAN) && (t || f) {
            drop(&mut rest, Types::BOOLEAN);
            if !t {
                parts.push("true".into());
            }
            if !f {
                parts.push("false".into());
            }
        }
        let mut nums: Vec<Dec> = ex
            .iter()
            .filter_map(|v| match v {
                Value::Number(x) => Dec::parse(&x.to_string()),
                _ => None,
            })
            .collect();
        nums.sort();
        nums.dedup();
        if Types(rest).has_numeric() && !nums.is_empty() {
            let numeric = Types(rest & (Types::INTEGER.0 | Types::NUMBER.0));
            drop(&mut rest, Types(Types::INTEGER.0 | Types::NUMBER.0));
            let mut lo: Option<Dec> = None;
            for hi in nums.iter().map(Some).chain(std::iter::once(None)) {
                let bounds = Node {
                    minimum: lo.clone().map(|value| Bound {
                        value,
                        exclusive: true,
                    }),
                    maximum: hi.cloned().map(|value| Bound {
                        value,
                        exclusive: true,
                    }),
                    ..blank(&n.at)
                };
                lo = hi.cloned();
                let m = ir::merge(&base, &bounds)?;
                if let (Some(a), Some(b)) = (&m.minimum, &m.maximum) {
                    if a.value > b.value || (a.value == b.value && (a.exclusive || b.exclusive)) {
                        continue;
                    }
                }
                parts.extend(self.number(&m, numeric)?);
            }
        }
        let strs: Vec<String> = ex
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        if Types(rest).has(Types::STRING) && !strs.is_empty() {
            drop(&mut rest, Types::STRING);
            if !base.has_string_keywords() {
                parts.push(extra_key(&strs, self.opts.allowed_escapes).into());
            } else {
                let mut only = base.clone();
                only.types = Some(Types::STRING);
                let hit = strs
                    .iter()
                    .any(|s| satisfies(&only, &Value::String(s.clone())) != Some(false));
                if hit {
                    self.doc.warn(
                        &n.at,
                        "strings not offered (an excluded enum string meets the string keywords)"
                            .into(),
                    );
                } else {
                    parts.extend(self.string_with_algebra(&base)?);
                }
            }
        }
        let lens: Vec<u64> = ex
            .iter()
            .filter_map(|v| v.as_array().map(|a| a.len() as u64))
            .collect();
        if Types(rest).has(Types::ARRAY) && !lens.is_empty() {
            drop(&mut rest, Types::ARRAY);
            self.doc.warn(
                &n.at,
                "arrays of an excluded enum array's length are not offered".into(),
            );
            let mut lo = base.min_items.unwrap_or(0);
            let top = base.max_items;
            let mut cuts: Vec<u64> = lens.clone();
            cuts.sort();
            cuts.dedup();
            for hi in cuts.iter().map(Some).chain(std::iter::once(None)) {
                let upper = match hi {
                    Some(&h) if h == 0 => {
                        lo = lo.max(1);
                        continue;
                    }
                    Some(&h) => Some(h - 1),
                    None => top,
                };
                let upper = match (upper, top) {
                    (Some(u), Some(t)) => Some(u.min(t)),
                    (u, t) => u.or(t),
                };
                if upper.is_none_or(|u| u >= lo) {
                    let mut m = base.clone();
                    m.min_items = Some(lo);
                    m.max_items = upper;
                    parts.extend(self.array(&m)?);
                }
                if let Some(&h) = hi {
                    lo = lo.max(h + 1);
                }
            }
        }
        let objs: Vec<usize> = ex
            .iter()
            .filter_map(|v| v.as_object().map(|o| o.len()))
            .collect();
        if Types(rest).has(Types::OBJECT) && !objs.is_empty() {
            drop(&mut rest, Types::OBJECT);
            if objs.iter().all(|&l| l == 0) {
                let mut m = base.clone();
                m.min_properties = Some(base.min_properties.unwrap_or(0).max(1));
                match self.object(&m, forbid) {
                    Ok(r) => parts.extend(r),
                    Err(_) => self.doc.warn(
                        &n.at,
                        "non-empty objects not offered (complement of {})".into(),
                    ),
                }
            } else {
                self.doc.warn(
                    &n.at,
                    "objects not offered (an enum object is excluded)".into(),
                );
            }
        }
        if rest != 0 {
            let mut m = base;
            m.types = Some(Types(rest));
            m.not_types = Types::NONE;
            parts.extend(self.leaf(&m, forbid)?);
        }
        Ok(alt_all(parts))
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    /// An object under `propertyNames`: declared keys whose names fail it
    /// are never written (a required one empties the object); extra keys
    /// are left as they are when the name schema says nothing about strings,
    /// become declared optional keys when it is an `enum`, and take the
    /// name schema's string language when it has only string keywords and
    /// no declared name satisfies it. Otherwise extra keys are not offered
    /// (a sound narrowing, with a warning). With `patternProperties` and a
    /// constraining name schema: an error.
    #[inline(never)]
    pub(super) fn object_with_names(
        &mut self,
        n: &Node,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        let mut m = n.clone();
        m.property_names.clear();
        let mut names: Vec<Node> = Vec::new();
        for s in &n.property_names {
            let mut entered = Vec::new();
            match self.schema_node(s, &mut entered)? {
                Some(x) => names.push(x),
                None => {
                    // No name is allowed: the empty object only.
                    if !m.required.is_empty() {
                        return Ok(None);
                    }
                    m.properties.clear();
                    m.pattern_properties.clear();
                    m.additional = Some(Schema::Bool(false));
                    return self.object(&m, forbid);
                }
            }
        }
        let mut name = names
            .into_iter()
            .try_fold(blank(&n.at), |a, b| ir::merge(&a, &b))?;
        // `not` (and the rest of the algebra) in the name schema: groups of
        // one branch are conjuncts.
        self.lower_logic(&mut name)?;
        let groups = std::mem::take(&mut name.any_of);
        for g in groups {
            if let [one] = &g[..] {
                let mut entered = Vec::new();
                match self.schema_node(one, &mut entered)? {
                    Some(x) => name = ir::merge(&name, &x)?,
                    None => name.never = true,
                }
            } else {
                name.any_of.push(g);
            }
        }
        let unsupported = |detail: &str| SchemaError::UnsupportedValue {
            what: "propertyNames".into(),
            pointer: name.at.clone(),
            detail: detail.into(),
        };
        let as_name = |k: &str| satisfies(&name, &Value::String(k.to_string()));
        // Declared (and required) keys.
        for r in &n.required {
            match as_name(r) {
                Some(true) => {}
                Some(false) => return Ok(None),
                None => return Err(unsupported("a name schema it cannot evaluate")),
            }
        }
        let mut kept = Vec::new();
        for (k, s) in &m.properties {
            match as_name(k) {
                Some(true) => kept.push((k.clone(), s.clone())),
                Some(false) => {}
                None => return Err(unsupported("a name schema it cannot evaluate")),
            }
        }
        m.properties = kept;
        let string_only = name.types.is_none_or(|t| t.has(Types::STRING))
            && name.not_types.is_empty()
            && name.all_of.is_empty()
            && name.any_of.is_empty()
            && name.one_of.is_empty()
            && !name.never;
        let says_nothing = string_only
            && name.enumeration.is_none()
            && name.not_values.is_empty()
            && !name.has_string_keywords();
        if says_nothing {
            return self.object(&m, forbid);
        }
        let patterns = !m.pattern_properties.is_empty();
        let extra = self.extras_schema(&m);
        if extra.is_none() && !patterns {
            return self.object(&m, forbid);
        }
        if let Some(vals) = &name.enumeration {
            // Finitely many names: each allowed undeclared one is an
            // optional declared key with the schema of the patterns it
            // matches, else the extra keys' schema.
            for v in vals {
                let Some(k) = v.as_str() else { continue };
                if m.properties.iter().any(|(d, _)| d == k) || forbid.iter().any(|f| f == k) {
                    continue;
                }
                if as_name(k) != Some(true) {
                    continue;
                }
                if !super::object::pattern_hits(&m.pattern_properties, k)?.is_empty() {
                    m.properties.push((k.to_string(), Schema::Bool(true)));
                } else if let Some(e) = &extra {
                    m.properties.push((k.to_string(), e.clone()));
                }
            }
            fold_patterns(&mut m)?;
            m.additional = Some(Schema::Bool(false));
            return self.object(&m, forbid);
        }
        let declared_ok = m
            .properties
            .iter()
            .map(|(k, _)| k)
            .chain(m.required.iter())
            .chain(forbid.iter())
            .all(|k| as_name(k) == Some(false));
        if string_only && name.not_values.is_empty() {
            let mut sn = name.clone();
            sn.types = Some(Types::STRING);
            let mut key = self.string_with_algebra(&sn)?;
            if !declared_ok {
                // Names in the language but declared: the product with the
                // complement of the declared names (one spelling per key).
                let taken: Vec<String> = m
                    .properties
                    .iter()
                    .map(|(k, _)| k.clone())
                    .chain(m.required.iter().cloned())
                    .chain(forbid.iter().cloned())
                    .collect();
                if let Some(k) = key {
                    key = self.combine(
                        &k.text(),
                        &extra_key(&taken, self.opts.allowed_escapes),
                        Op::And,
                        "propertyNames",
                        &name.at,
                    )?;
                }
            }
            let Some(key) = key else {
                fold_patterns(&mut m)?;
                m.additional = Some(Schema::Bool(false));
                return self.object(&m, forbid);
            };
            self.extra_key_lang = Some(key);
            let r = self.object(&m, forbid);
            self.extra_key_lang = None;
            return r;
        }
        self.doc.warn(
            &name.at,
            "extra keys not offered (propertyNames cannot be intersected with the declared names)"
                .into(),
        );
        fold_patterns(&mut m)?;
        m.additional = Some(Schema::Bool(false));
        self.object(&m, forbid)
    }
}

/// `patternProperties` folded into the declared keys (each declared or
/// required key takes the schemas of the patterns it matches) and then
/// dropped: no key beyond the declared ones is offered.
fn fold_patterns(m: &mut Node) -> Result<(), SchemaError> {
    if m.pattern_properties.is_empty() {
        return Ok(());
    }
    for r in &m.required {
        if !m.properties.iter().any(|(k, _)| k == r) {
            let rest = match &m.additional {
                Some(s) => s.clone(),
                None => Schema::Bool(true),
            };
            let hits = super::object::pattern_hits(&m.pattern_properties, r)?;
            let s = if hits.is_empty() {
                rest
            } else {
                Schema::Bool(true)
            };
            m.properties.push((r.clone(), s));
        }
    }
    for (k, s) in m.properties.iter_mut() {
        let hits = super::object::pattern_hits(&m.pattern_properties, k)?;
        if !hits.is_empty() {
            let mut all = vec![s.clone()];
            all.extend(hits);
            *s = super::object::all_of(&m.at, all);
        }
    }
    m.pattern_properties.clear();
    Ok(())
}

/// The default product limits ([`SchemaOptions::max_product_states`],
/// [`SchemaOptions::max_product_len`]): a product past them (allowed by
/// larger limits) is kept only when its groups nest at most
/// [`PRODUCT_NEST`] deep.
const DEFAULT_PRODUCT_STATES: usize = 4096;

const DEFAULT_PRODUCT_LEN: usize = 256 << 10;

/// Deepest nesting of groups and classes kept in a product past the
/// default limits: half the parser's limit ([`crate::dfa::NEST_LIMIT`]),
/// leaving room for the groups around it.
const PRODUCT_NEST: usize = crate::dfa::NEST_LIMIT as usize / 2;

/// Why a memoised product was not built ([`AlgebraError`], kept as a value).
#[derive(Clone)]
pub(super) enum Failed {
    States(usize),
    Len(usize),
    Dfa(String),
}

/// A memo for the whole schema being compiled: what the generator asked
/// for once, kept by its key ([`Gen::product`], [`Gen::pattern_regex`],
/// `Gen::free_key`).
pub(super) struct Memo<K, V>(std::cell::RefCell<HashMap<K, V>>);

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo(Default::default())
    }
}

impl<K: std::hash::Hash + Eq, V: Clone> Memo<K, V> {
    /// The value kept for `key`, else `make()`'s, kept. With `on` false,
    /// `make()`'s, neither read nor kept (the tests that show a memo
    /// changes no output).
    pub(super) fn get_or<Q>(&self, on: bool, key: &Q, make: impl FnOnce() -> V) -> V
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if !on {
            return make();
        }
        if let Some(v) = self.0.borrow().get(key) {
            return v.clone();
        }
        let v = make();
        self.0.borrow_mut().insert(key.to_owned(), v.clone());
        v
    }
}

/// The memo of [`Gen::pattern_regex`]: the pattern (or format regex), the
/// length bounds, and whether it is a format's regex.
pub(super) type Patterns =
    Memo<(String, u64, Option<u64>, bool), Result<pattern::CompiledPattern, String>>;

/// The memo of [`Gen::product`]: both regexes, the operation and the two
/// limits it ran under.
pub(super) type Products = Memo<(String, String, Op, usize, usize), Result<Lang, Failed>>;

/// How deep groups `(` and classes `[` nest in regex text (escapes
/// skipped; a class counts one level, its contents none).
fn nest_depth(re: &str) -> usize {
    let (mut depth, mut max, mut class) = (0usize, 0usize, 0usize);
    let mut bytes = re.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => {
                bytes.next();
            }
            b'[' => {
                if class == 0 {
                    depth += 1;
                    max = max.max(depth);
                }
                class += 1;
            }
            b']' if class > 0 => {
                class -= 1;
                if class == 0 {
                    depth -= 1;
                }
            }
            b'(' if class == 0 => {
                depth += 1;
                max = max.max(depth);
            }
            b')' if class == 0 => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Every JSON string in its one canonical spelling (no `\u` escapes; the
/// control characters without a short escape are left out).
const CANONICAL_STRING: &str = r#""(?:[^"\\\x00-\x1F]|\\["\\bfnrt])*""#;

impl<'d, 'a> Gen<'d, 'a> {
    /// `a op b` through a product automaton, bounded by
    /// `max_product_states` / `max_product_len` (errors name `what` and `at`).
    pub(super) fn combine(
        &self,
        a: &str,
        b: &str,
        op: Op,
        what: &str,
        at: &Pointer,
    ) -> Result<Lang, SchemaError> {
        // Within the default limits first; past them (larger limits, as
        // compliant mode's), a product is kept only when its groups nest
        // at most PRODUCT_NEST deep: deeper, the parser's nesting limit
        // would refuse the whole regex, so the default limits' error
        // stands (callers that fall back on it still can).
        let (states, len) = (
            self.opts.max_product_states.min(DEFAULT_PRODUCT_STATES),
            self.opts.max_product_len.min(DEFAULT_PRODUCT_LEN),
        );
        let larger = (self.opts.max_product_states, self.opts.max_product_len) != (states, len);
        let result = match self.product(a, b, op, states, len) {
            Err(Failed::States(_) | Failed::Len(_)) if larger => {
                match self.product(
                    a,
                    b,
                    op,
                    self.opts.max_product_states,
                    self.opts.max_product_len,
                ) {
                    Ok(Some(r)) if nest_depth(&r.text()) > PRODUCT_NEST => {
                        self.product(a, b, op, states, len)
                    }
                    r => r,
                }
            }
            r => r,
        };
        match result {
            Ok(r) => Ok(r),
            Err(Failed::States(limit)) => Err(SchemaError::TooBig {
                what: format!("{what}: product automaton states"),
                pointer: at.clone(),
                size: limit as u64 + 1,
                limit: limit as u64,
                knob: "max_product_states",
            }),
            Err(Failed::Len(limit)) => Err(SchemaError::TooBig {
                what: format!("{what}: regex of the product automaton"),
                pointer: at.clone(),
                size: limit as u64 + 1,
                limit: limit as u64,
                knob: "max_product_len",
            }),
            Err(Failed::Dfa(detail)) => Err(SchemaError::UnsupportedValue {
                what: what.into(),
                pointer: at.clone(),
                detail,
            }),
        }
    }

    /// A pattern (ECMA-262) compiled for the inside of a JSON string
    /// within length bounds ([`pattern::compile_pattern`]), or, with
    /// `format`, a format's regex cut to them ([`pattern::restrict_regex`]),
    /// memoised for the whole schema: a definition's strings are compiled
    /// at each place the generator writes it, and each compile parses the
    /// pattern again.
    pub(super) fn pattern_regex(
        &self,
        text: &str,
        min: u64,
        max: Option<u64>,
        format: bool,
    ) -> Result<pattern::CompiledPattern, String> {
        let key = (text.to_owned(), min, max, format);
        self.patterns.get_or(self.memoise, &key, || {
            if format {
                pattern::restrict_regex(text, min, max)
            } else {
                pattern::compile_pattern(text, min, max)
            }
        })
    }

    /// [`algebra::combine`] memoised for the whole schema: a definition
    /// used at many places asks for the same product at each (a pattern
    /// with its length bounds, a `not` of the same pattern), and each
    /// product determinizes both sides and reads a regex back.
    fn product(&self, a: &str, b: &str, op: Op, states: usize, len: usize) -> Result<Lang, Failed> {
        let key = (a.to_owned(), b.to_owned(), op, states, len);
        self.products.get_or(self.memoise, &key, || {
            algebra::combine(a, b, op, states, len)
                .map(text_lang)
                .map_err(|e| match e {
                    AlgebraError::TooManyStates { limit } => Failed::States(limit),
                    AlgebraError::TooLong { limit } => Failed::Len(limit),
                    AlgebraError::Dfa(e) => Failed::Dfa(e.to_string()),
                })
        })
    }

    /// [`Gen::string`], through [`Gen::string_algebra`] when the node has
    /// several patterns/formats or excluded patterns.
    pub(super) fn string_with_algebra(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        if n.not_patterns.is_empty() && n.patterns.len() + n.formats.len() <= 1 {
            self.string(n)
        } else {
            self.string_algebra(n)
        }
    }

    /// The quoted spelled language of one pattern, exactly (`None`: the
    /// pattern cannot be compiled exactly).
    pub(super) fn pattern_language(&self, p: &ir::Located<String>) -> Result<Lang, SchemaError> {
        match self.pattern_regex(&p.value, 0, None, false) {
            Ok(c) if c.narrowed.is_none() => Ok(c.regex.map(|r| rx!["\"", r, "\""])),
            Ok(_) => Err(SchemaError::Pattern {
                pointer: p.at.clone(),
                detail: format!("{:?} is narrowed and cannot be intersected", p.value),
            }),
            Err(e) => Err(SchemaError::Pattern {
                pointer: p.at.clone(),
                detail: format!("{:?}: {e}", p.value),
            }),
        }
    }

    /// Strings with several patterns/formats, or with patterns they must
    /// not match: the first constraint through [`Gen::string`], the others
    /// intersected (`pattern`, `format`) or subtracted (`not: {pattern}`)
    /// by product automata.
    #[inline(never)]
    pub(super) fn string_algebra(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        let mut first = n.clone();
        first.not_patterns.clear();
        let mut rest: Vec<Rx> = Vec::new();
        let mut rest_at: Vec<Pointer> = Vec::new();
        if first.patterns.len() + first.formats.len() > 1 {
            let keep_format = !first.formats.is_empty();
            for p in first.patterns.drain(if keep_format { 0.. } else { 1.. }) {
                let Some(l) = self.pattern_language(&p)? else {
                    return Ok(None);
                };
                rest.push(l);
                rest_at.push(p.at);
            }
            let extra_formats: Vec<_> = first.formats.drain(first.formats.len().min(1)..).collect();
            for f in extra_formats {
                let re = formats::format_regex(&f.value).expect("supported format");
                rest.push(rx!["\"", re, "\""]);
                rest_at.push(f.at);
            }
        }
        let Some(mut lang) = self.string(&first)? else {
            return Ok(None);
        };
        for (l, at) in rest.iter().zip(&rest_at) {
            match self.combine(
                &lang.text(),
                &l.text(),
                Op::And,
                "several patterns/formats",
                at,
            )? {
                Some(r) => lang = r,
                None => return Ok(None),
            }
        }
        if !n.not_patterns.is_empty() {
            // One spelling per string, so that subtracting spellings
            // subtracts strings.
            let at = &n.not_patterns[0].at;
            match self.combine(&lang.text(), CANONICAL_STRING, Op::And, "not: pattern", at)? {
                Some(r) => lang = r,
                None => return Ok(None),
            }
            for p in &n.not_patterns {
                let Some(l) = self.pattern_language(p)? else {
                    continue;
                };
                match self.combine(&lang.text(), &l.text(), Op::AndNot, "not: pattern", &p.at)? {
                    Some(r) => lang = r,
                    None => return Ok(None),
                }
            }
        }
        Ok(Some(lang))
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    /// The possible values of an item schema when it has few (an `enum`,
    /// `const`, `boolean`, a small integer range); `None` otherwise.
    fn finite_values(&mut self, item: &Schema) -> Result<Option<Vec<Value>>, SchemaError> {
        let mut entered = Vec::new();
        let Some(node) = self.schema_node(item, &mut entered)? else {
            return Ok(Some(Vec::new()));
        };
        if !node.any_of.is_empty()
            || !node.one_of.is_empty()
            || !node.nots.is_empty()
            || !node.conditionals.is_empty()
        {
            return Ok(None);
        }
        let types = self.gen_types(&node);
        let candidates: Vec<Value> = if let Some(vals) = &node.enumeration {
            vals.clone()
        } else if types == Types::BOOLEAN {
            vec![Value::Bool(false), Value::Bool(true)]
        } else if types == Types::INTEGER
            || (types.has_numeric() && node.types == Some(Types::INTEGER))
        {
            let (l, h) = numeric::integer_bounds(node.minimum.as_ref(), node.maximum.as_ref());
            match (l.and_then(|x| x.to_i128()), h.and_then(|x| x.to_i128())) {
                (Some(l), Some(h)) if h >= l && h - l < 64 => {
                    (l..=h).map(|i| Value::from(i as i64)).collect()
                }
                _ => return Ok(None),
            }
        } else {
            return Ok(None);
        };
        let mut out: Vec<Value> = Vec::new();
        for v in candidates {
            if !types.admits(&v) || out.iter().any(|w| ir::json_eq(w, &v)) {
                continue;
            }
            match satisfies(&node, &v) {
                Some(true) => out.push(v),
                Some(false) => {}
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// `uniqueItems`: exact when the items have at most
    /// `max_unique_values` possible values (every ordering of distinct
    /// values is listed); more listed values: narrowed to the listed order
    /// (with a warning; `minItems` / `maxItems` the narrowing cannot meet
    /// are an error naming `uniqueItems`); no finite set: an error (lenient
    /// mode ignores the keyword with a warning).
    #[inline(never)]
    pub(super) fn array_unique(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        let mut m = n.clone();
        m.unique_items = false;
        let unsupported = |detail: &str| SchemaError::UnsupportedValue {
            what: "uniqueItems".into(),
            pointer: n.at.clone(),
            detail: detail.into(),
        };
        let tuple = n.prefix_items.is_some() || !n.contains.is_empty();
        let item = n.items.clone().unwrap_or(Schema::Bool(true));
        let min = n.min_items.unwrap_or(0);
        let max = n.max_items.unwrap_or(u64::MAX);
        let values = self.finite_values(&item)?;
        if self.doc.unique_checked_at(&n.at)
            && (tuple
                || values
                    .as_ref()
                    .is_none_or(|v| v.len() > self.opts.max_unique_values))
        {
            // Checked at run time by the matcher (`crate::unique`): the
            // automaton keeps the array without it.
            if let Some(v) = values.as_ref().filter(|v| !tuple && (v.len() as u64) < min) {
                return Err(unsupported(&format!(
                    "minItems {min} distinct items of only {} possible values",
                    v.len()
                )));
            }
            return self.array(&m);
        }
        if tuple {
            return Err(unsupported("together with prefixItems/contains"));
        }
        let Some(values) = values else {
            // Neither exact (no small finite item language) nor checked at
            // run time: an error naming the keyword, or ignored
            // with a warning when lenient. (Narrowing to at most one item
            // was tried: sound, and 18 more MaskBench files pass, but a
            // list of unique strings would never hold two; not taken.)
            let detail = match self.doc.unique_refused_at(&n.at) {
                Some(why) => format!(
                    "the items have no small finite set of values, and the run-time check cannot tell this array by its place: {why}"
                ),
                None => "the items have no small finite set of values".into(),
            };
            self.doc.soft(unsupported(&detail), self.opts.lenient)?;
            return self.array(&m);
        };
        if values.len() > self.opts.max_unique_values {
            // Every ordering would be too many branches: narrowed to the
            // distinct values in listed order (linear text), where the
            // counts allow any such subsequence.
            if min > 1 || max < values.len() as u64 {
                return Err(SchemaError::TooBig {
                    what: "uniqueItems: possible item values".into(),
                    pointer: n.at.clone(),
                    size: values.len() as u64,
                    limit: self.opts.max_unique_values as u64,
                    knob: "max_unique_values",
                });
            }
            self.doc.warn(
                &n.at,
                format!(
                    "uniqueItems over {} possible item values (more than max_unique_values {}): narrowed to distinct values in the order the schema lists them",
                    values.len(),
                    self.opts.max_unique_values
                ),
            );
            let props: Vec<object::Prop> = values
                .iter()
                .map(|v| object::Prop {
                    kv: self.literal(v).into(),
                    required: false,
                })
                .collect();
            let Lay { inner, comma, .. } = self.lay.clone();
            if props.is_empty() {
                return Ok((min == 0).then(|| rx!["\\[", &inner, "\\]"]));
            }
            let body = object::ordered_nonempty(&props, &comma);
            return Ok(Some(if min == 0 {
                rx!["\\[", &inner, "(?:", body, ")?", &inner, "\\]"]
            } else {
                rx!["\\[", &inner, body, &inner, "\\]"]
            }));
        }
        let lits: Vec<String> = values.iter().map(|v| self.literal(v)).collect();
        let Layout { inner, comma, .. } = self.lay.text.clone();
        // Sequences of distinct values continuing after `used` (`depth`
        // items written).
        fn rest(
            lits: &[String],
            used: u32,
            depth: u64,
            min: u64,
            max: u64,
            comma: &str,
        ) -> Option<String> {
            let mut alts: Vec<String> = Vec::new();
            let mut empty = false;
            if depth >= min {
                empty = true;
            }
            if depth < max {
                for (i, l) in lits.iter().enumerate() {
                    if used & (1 << i) != 0 {
                        continue;
                    }
                    if let Some(r) = rest(lits, used | (1 << i), depth + 1, min, max, comma) {
                        let sep = if depth == 0 { "" } else { comma };
                        alts.push(format!("{sep}{l}{r}"));
                    }
                }
            }
            match (alts.is_empty(), empty) {
                (true, true) => Some(String::new()),
                (true, false) => None,
                (false, e) => Some(format!(
                    "(?:{}{})",
                    alts.join("|"),
                    if e { "|" } else { "" }
                )),
            }
        }
        Ok(rest(&lits, 0, 0, min, max, &comma).map(|b| format!("\\[{inner}{b}{inner}\\]").into()))
    }
}

#[cfg(test)]
mod nest_tests {
    use super::nest_depth;

    #[test]
    fn nest_depth_counts_groups_and_classes_not_escapes() {
        assert_eq!(nest_depth("abc"), 0);
        assert_eq!(nest_depth("(?:a(b)[c(])"), 2);
        assert_eq!(nest_depth(r"\(\(\[a]"), 0);
        assert_eq!(nest_depth("((((x))))"), 4);
    }
}

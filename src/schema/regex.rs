//! # IR → regex
//!
//! `Gen` walks the `ir::Schema` tree and writes regex
//! text, as a tree of shared pieces (`rx`: joining copies nothing, and
//! the text is written out once at the end). A sub-language is an
//! `Option<Rx>`: `None` is the empty language
//! (a `false` schema, a recursion cut, an unsatisfiable range), and it
//! propagates: a required property with no possible value empties its object,
//! an optional one is simply never offered.
//!
//! - `$ref`: resolved through the schema `Document`; each target may be active at
//!   most `max_depth + 1` times on the current path, past which it is `None`.
//!   Results are memoised per target and per the recursion state of the refs
//!   it can reach, so a definition used 500 times is generated once, and
//!   held once: each use shares its `Rx` (the written-out text still
//!   repeats it, as a regex cannot share sub-expressions).
//! - `allOf` (and `$ref` siblings): merged into one node by `ir::merge`.
//! - `anyOf`: an alternation of the branches, each merged with the node's
//!   other keywords. `oneOf`: the same after proving that no output of one
//!   branch validates against another (types, `enum`/`const`, a `required`
//!   key with disjoint values, or a key another branch requires that this
//!   branch then never writes); otherwise [`SchemaError::OneOfOverlap`], or
//!   `anyOf` with a warning when [`SchemaOptions::coerce_one_of`] is set.
//!   Several groups on one node are distributed one at a time, pruned of
//!   repeated groups and contradicting branches first (`prune`).
//! - Objects: declared order is linear in the number of properties (the
//!   first required key is the pivot: optional keys before it carry a
//!   trailing comma, keys after it a leading one; with no required key the
//!   nesting `A_i = A_{i-1}(,K_i)? | K_i` keeps it linear). Small objects in
//!   compliant mode use a subset tree for any order. Extra keys follow the
//!   declared ones; their names are the complement of the declared names.
//! - Free-form values: one depth-bounded regex built once per depth.

use super::eval;
use super::ir::{self, Document, Node, Schema, Types};
use super::numeric::{self, Dec};
use super::pattern;
use super::whitespace::Layout;
use super::{formats, CompiledSchema, JsonMode, Pointer, SchemaError, SchemaOptions};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

mod array;
mod calls;
mod contains;
mod counted;
mod leaves;
mod logic;
mod nodes;
pub(crate) use calls::compile_fragments_compact;
pub(crate) use calls::marker;
pub use calls::{compile_fragments, SchemaFragments, ANY_VALUE};
mod object;
mod one_of;
mod prune;
mod refs;
mod residue;
mod rx;
mod satisfy;
mod scalars;
mod some_extra;
mod text;
use object::*;
use rx::{rx, Rx};
use satisfy::collect_refs;
pub(crate) use satisfy::satisfies;
use text::*;
pub use text::{py_float, py_string};

/// One character of a JSON string in canonical spelling (any Unicode scalar
/// but `"`, `\` and controls; the short escapes; `\u00XX` for controls).
pub const CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\bfnrt]|\\u00[01][0-9a-fA-F])"#;
/// One character of an extra (undeclared) key: no `\u` escapes, so each key
/// has exactly one spelling and the complement of declared names is exact.
const KEY_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\bfnrt])"#;
pub(crate) fn compile_document(
    schema: &Value,
    opts: &SchemaOptions,
) -> Result<CompiledSchema, SchemaError> {
    // Recursion is unrolled by repeating text (a regex cannot share a
    // sub-expression), so a recursive definition used in many places can
    // run past `max_regex_len`: unroll it less deep, down to not at all
    // (sound: deeper nesting is simply not offered), with a warning.
    let mut depth = opts.max_depth;
    loop {
        let narrowed;
        let o = if depth == opts.max_depth {
            opts
        } else {
            narrowed = SchemaOptions {
                max_depth: depth,
                ..opts.clone()
            };
            &narrowed
        };
        match compile_at_depth(schema, o) {
            Err(SchemaError::TooBig {
                knob: "max_regex_len",
                ..
            }) if depth > 0 && o.max_depth > 0 => depth -= 1,
            Ok(mut c) if depth < opts.max_depth => {
                c.warnings.push(super::SchemaWarning {
                    pointer: Pointer::root(),
                    message: format!(
                        "recursion unrolled to depth {depth} instead of max_depth {} to keep the regex within max_regex_len",
                        opts.max_depth
                    ),
                });
                return Ok(c);
            }
            r => return r,
        }
    }
}

fn compile_at_depth(schema: &Value, opts: &SchemaOptions) -> Result<CompiledSchema, SchemaError> {
    compile_memoised(schema, opts, true)
}

/// [`compile_at_depth`], with the generator's memos (products, patterns,
/// extra keys, `oneOf` proofs) on or off.
fn compile_memoised(
    schema: &Value,
    opts: &SchemaOptions,
    memoise: bool,
) -> Result<CompiledSchema, SchemaError> {
    // `$ref`s to the meta-schemas resolve to the bundled copies.
    let schema = crate::schema::documents::bundle(schema, &Default::default());
    super::escapes::check(&schema, opts.allowed_escapes)?;
    let doc = Document::new(&schema, opts);
    let root = doc.root()?;
    let mut g = Gen::new(&doc);
    g.memoise = memoise;
    let regex = g.value(&root, &[])?;
    let Some(regex) = regex else {
        return Err(SchemaError::Empty {
            pointer: Pointer::root(),
            detail: format!(
                " (recursion unrolled to depth {}, free-form depth {})",
                opts.max_depth, opts.free_form_depth
            ),
        });
    };
    Ok(CompiledSchema {
        regex: plain_text(regex.text(), opts)?,
        warnings: doc.warnings.take(),
    })
}

/// The generator's text in plain regex syntax: one-copy constructs
/// written out ([`crate::dfa::ordered`]), within
/// [`SchemaOptions::max_regex_len`].
pub(crate) fn plain_text(text: String, opts: &SchemaOptions) -> Result<String, SchemaError> {
    match crate::dfa::ordered::expand(&text, opts.max_regex_len) {
        Ok(std::borrow::Cow::Borrowed(_)) => Ok(text),
        Ok(std::borrow::Cow::Owned(plain)) => Ok(plain),
        Err(_) => Err(plain_too_long(opts)),
    }
}

/// [`plain_text`]'s error: the text written out runs past
/// [`SchemaOptions::max_regex_len`].
pub(crate) fn plain_too_long(opts: &SchemaOptions) -> SchemaError {
    SchemaError::TooBig {
        what: "regex text with its one-copy constructs (optional members, array items) written out"
            .into(),
        pointer: Pointer::root(),
        size: opts.max_regex_len as u64 + 1,
        limit: opts.max_regex_len as u64,
        knob: "max_regex_len",
    }
}

pub(crate) struct Gen<'d, 'a> {
    doc: &'d Document<'a>,
    opts: SchemaOptions,
    lay: Lay,
    active: HashMap<String, usize>,
    free: Vec<Rx>,
    memo: HashMap<String, Lang>,
    reach: HashMap<String, Rc<HashSet<String>>>,
    flatten_depth: usize,
    nesting: usize,
    /// Instance containers (objects, arrays) entered: 0 while generating
    /// the document's own value.
    containers: usize,
    /// `$ref`s being complemented (a recursive one cannot be cut under `not`).
    neg_active: HashMap<String, usize>,
    /// Set by `propertyNames` for the next [`Gen::object`]: the language of
    /// its extra keys (none of the declared names is in it).
    extra_key_lang: Option<Rx>,
    /// Set for the pushdown engine: a reference into a recursive component
    /// becomes a call marker instead of being unrolled ([`calls`]).
    calls: Option<calls::Calls>,
    /// Combinations of `anyOf`/`oneOf` branches explored under the node
    /// being generated ([`prune`]).
    explored: u64,
    /// Product automata already read back ([`leaves`]).
    products: leaves::Products,
    /// Patterns already compiled with their length bounds ([`leaves`]).
    patterns: leaves::Patterns,
    /// The extra-key languages written, by the declared names ([`Gen::free_key`]).
    free_keys: leaves::Memo<Vec<String>, Rx>,
    /// `oneOf` proofs already made, by the pointer of their node ([`one_of`]).
    proofs: HashMap<Pointer, Vec<one_of::Proof>>,
    /// While a `oneOf` proof runs: per `$ref` it enters, the most times it
    /// was entered within the proof ([`one_of`]).
    proof_depths: Option<HashMap<String, usize>>,
    /// While a `oneOf` proof runs: the groups it merged ([`one_of`]).
    expansions: Option<one_of::Expansions>,
    /// Whether `products`, `patterns`, `free_keys`, `proofs` and `expansions` are used
    /// (off in the test that shows they change no output).
    memoise: bool,
}

/// The whitespace [`Layout`] as pieces of [`Rx`] text.
#[derive(Clone)]
pub(crate) struct Lay {
    inner: Rx,
    comma: Rx,
    colon: Rx,
    /// The same as strings.
    text: Layout,
}

impl Lay {
    fn of(l: Layout) -> Lay {
        Lay {
            inner: Rx::owned(&l.inner),
            comma: Rx::owned(&l.comma),
            colon: Rx::owned(&l.colon),
            text: l,
        }
    }
}

/// Deepest nesting of schemas the generator follows.
const MAX_NESTING: usize = 200;

impl<'d, 'a> Gen<'d, 'a> {
    pub(crate) fn new(doc: &'d Document<'a>) -> Self {
        let opts = doc.opts().clone();
        let lay = Lay::of(opts.whitespace.layout());
        Gen {
            doc,
            opts,
            lay,
            active: HashMap::new(),
            free: Vec::new(),
            memo: HashMap::new(),
            reach: HashMap::new(),
            flatten_depth: 0,
            nesting: 0,
            containers: 0,
            neg_active: HashMap::new(),
            extra_key_lang: None,
            calls: None,
            explored: 0,
            products: Default::default(),
            patterns: Default::default(),
            free_keys: Default::default(),
            proofs: HashMap::new(),
            proof_depths: None,
            expansions: None,
            memoise: true,
        }
    }

    /// Adds a branch's text to the running length `len` of an alternation
    /// and fails once it passes `max_regex_len`. Nested groups multiply, so
    /// the union is bounded as it grows, not only each branch (each may be
    /// under the limit while their union is gigabytes).
    fn grow_alternation(&self, len: &mut usize, r: &Lang, at: &Pointer) -> Result<(), SchemaError> {
        *len += r.as_ref().map_or(0, |r| r.len() + 1);
        self.check_len(*len, at)
    }

    fn check_len(&self, len: usize, at: &Pointer) -> Result<(), SchemaError> {
        if len > self.opts.max_regex_len {
            return Err(SchemaError::TooBig {
                what: "regex text".into(),
                pointer: at.clone(),
                size: len as u64,
                limit: self.opts.max_regex_len as u64,
                knob: "max_regex_len",
            });
        }
        Ok(())
    }

    fn check_size(&self, s: &Lang, at: &Pointer) -> Result<(), SchemaError> {
        s.as_ref().map_or(Ok(()), |s| self.check_len(s.len(), at))
    }

    /// Keywords that contradict each other at one position: an error in
    /// strict mode (the schema surely does not mean it), the empty language
    /// in compliant mode, as validators read it (nothing validates there,
    /// so an optional property or an `anyOf` branch is simply never
    /// offered), with a warning.
    fn contradiction(&self, e: SchemaError) -> Result<Lang, SchemaError> {
        match self.opts.mode {
            JsonMode::Strict => Err(e),
            JsonMode::Compliant => {
                self.doc
                    .warn(e.pointer(), format!("{e} (nothing validates there)"));
                Ok(None)
            }
        }
    }

    // ---------------------------------------------------------------- free form

    /// One character of a string with no pattern, format or listed values
    /// (see [`super::Escapes::unit`]); `counted` (under `minLength` /
    /// `maxLength`): no `\u00XX` escapes but with general escapes (fewer
    /// DFA states per position).
    fn string_char(&self, counted: bool) -> Rx {
        let (esc, general) = (self.opts.allowed_escapes, self.opts.general_unicode_escapes);
        match (esc.is_all() && !general, counted) {
            (true, false) => CHAR.into(),
            (true, true) => KEY_CHAR.into(),
            (false, _) => esc.unit(general, general || !counted).into(),
        }
    }

    fn string_any(&self) -> Rx {
        rx!["\"", self.string_char(false), "*\""]
    }

    /// A key other than `names`: with no names and general escapes, any
    /// string; otherwise canonical spellings, so that the complement of
    /// the names is exact ([`extra_key`]).
    ///
    /// Memoised for the whole schema: an object's extra keys are written
    /// at each place the generator writes the object.
    fn free_key(&self, names: &[String]) -> Rx {
        if names.is_empty() && self.opts.general_unicode_escapes {
            return self.string_any();
        }
        self.free_keys.get_or(self.memoise, names, || {
            extra_key(names, self.opts.allowed_escapes).into()
        })
    }

    fn scalar_any(&self) -> Rx {
        rx![
            "(?:null|true|false|",
            numeric::number_any(),
            "|",
            self.string_any(),
            ")"
        ]
    }

    /// Any JSON value nesting at most `d` containers (for the pushdown
    /// engine, when free-form values are calls: a call of the shared "any
    /// JSON value" fragment, any depth; see `calls`).
    fn free_form(&mut self, d: usize) -> Rx {
        if let Some(call) = self.calls.as_mut().and_then(calls::Calls::any_value) {
            return call.into();
        }
        while self.free.len() <= d {
            let k = self.free.len();
            let s = if k == 0 {
                self.scalar_any()
            } else {
                let v = self.free[k - 1].clone();
                self.containers_of(&v)
            };
            self.free.push(s);
        }
        self.free[d].clone()
    }

    /// A scalar, or an array or object whose values are `v`, in the
    /// schema's whitespace layout.
    fn containers_of(&self, v: &Rx) -> Rx {
        let Lay {
            inner,
            comma,
            colon,
            ..
        } = &self.lay;
        let key = self.string_any();
        rx![
            "(?:",
            self.scalar_any(),
            "|\\[",
            inner,
            "(?:",
            v,
            "(?:",
            comma,
            v,
            ")*)?",
            inner,
            "\\]|\\{",
            inner,
            "(?:",
            &key,
            colon,
            v,
            "(?:",
            comma,
            &key,
            colon,
            v,
            ")*)?",
            inner,
            "\\})"
        ]
    }

    fn any(&mut self) -> Rx {
        self.note_explicit_free_form();
        self.free_form(self.opts.free_form_depth)
    }

    /// Records that the schema holds an explicit free-form value
    /// (see [`SchemaOptions::deep_free_form`]).
    fn note_explicit_free_form(&mut self) {
        if let Some(c) = self.calls.as_mut() {
            c.explicit_free_form = true;
        }
    }

    // ---------------------------------------------------------------- values

    /// The language of a schema. `forbid`: keys the (top-level) object must
    /// not contain (used to make `oneOf` branches disjoint).
    pub(crate) fn value(&mut self, s: &Schema, forbid: &[String]) -> Result<Lang, SchemaError> {
        // Bounds the generator's own recursion (long non-recursive $ref chains).
        if self.nesting >= MAX_NESTING {
            return Err(SchemaError::TooBig {
                what: "schema nesting".into(),
                pointer: match s {
                    Schema::Node(n) => n.at.clone(),
                    Schema::Ref { at, .. } => at.clone(),
                    Schema::Bool(_) => Pointer::root(),
                },
                size: self.nesting as u64,
                limit: MAX_NESTING as u64,
                knob: "max_depth",
            });
        }
        self.nesting += 1;
        let r = self.value_inner(s, forbid);
        self.nesting -= 1;
        r
    }

    fn value_inner(&mut self, s: &Schema, forbid: &[String]) -> Result<Lang, SchemaError> {
        match s {
            Schema::Bool(true) => Ok(Some(self.any())),
            Schema::Bool(false) => Ok(None),
            Schema::Ref { target, .. } => self.enter_ref(target, forbid),
            Schema::Node(n) => {
                let r = self.node(n, forbid)?;
                self.check_size(&r, &n.at)?;
                Ok(r)
            }
        }
    }

    /// Merges `allOf` members (and `$ref`) into one node. Refs entered are
    /// appended to `entered`. `None`: a member is `false` or a cut recursion.
    fn flatten(
        &mut self,
        n: &Node,
        entered: &mut Vec<String>,
    ) -> Result<Option<Node>, SchemaError> {
        if n.all_of.is_empty() {
            return Ok(Some(n.clone()));
        }
        self.flatten_depth += 1;
        if self.flatten_depth > 64 {
            self.flatten_depth -= 1;
            return Err(SchemaError::TooBig {
                what: "allOf/$ref nesting".into(),
                pointer: n.at.clone(),
                size: 65,
                limit: 64,
                knob: "max_depth",
            });
        }
        let r = self.flatten_inner(n, entered);
        self.flatten_depth -= 1;
        r
    }

    fn flatten_inner(
        &mut self,
        n: &Node,
        entered: &mut Vec<String>,
    ) -> Result<Option<Node>, SchemaError> {
        let mut base = n.clone();
        base.all_of.clear();
        for m in &n.all_of {
            let Some(mn) = self.schema_node(m, entered)? else {
                return Ok(None);
            };
            base = ir::merge(&base, &mn)?;
        }
        Ok(Some(base))
    }

    /// A schema as a flattened node (`None` = empty language).
    fn schema_node(
        &mut self,
        s: &Schema,
        entered: &mut Vec<String>,
    ) -> Result<Option<Node>, SchemaError> {
        match s {
            Schema::Bool(true) => Ok(Some(Node::default())),
            Schema::Bool(false) => Ok(None),
            Schema::Node(n) => self.flatten(n, entered),
            Schema::Ref { target, at } => {
                let inner = entered.iter().filter(|t| *t == target).count();
                if let Some(depths) = self.proof_depths.as_mut() {
                    let d = depths.entry(target.clone()).or_insert(0);
                    *d = (*d).max(inner);
                }
                let count = self.active.get(target).copied().unwrap_or(0) + inner;
                if count > self.opts.max_depth {
                    return Ok(None);
                }
                entered.push(target.clone());
                let rs = self.doc.get(target)?;
                let mut node = match &*rs {
                    Schema::Bool(true) => Some(Node::default()),
                    Schema::Bool(false) => None,
                    Schema::Ref { .. } => {
                        let wrapped = Node {
                            at: at.clone(),
                            all_of: vec![(*rs).clone()],
                            ..Default::default()
                        };
                        self.flatten(&wrapped, entered)?
                    }
                    Schema::Node(n) => self.flatten(n, entered)?,
                };
                if let Some(n) = node.as_mut() {
                    if n.at.0.is_empty() && !target.is_empty() {
                        n.at = Pointer(super::ir::key_pointer(target).to_string());
                    }
                }
                Ok(node)
            }
        }
    }

    fn node(&mut self, n: &Node, forbid: &[String]) -> Result<Lang, SchemaError> {
        if self.calls.is_some() && forbid.is_empty() {
            if let Some(call) = self.ref_call(n)? {
                return Ok(Some(call.into()));
            }
        }
        let mut entered = Vec::new();
        let Some(flat) = self.flatten(n, &mut entered)? else {
            return Ok(None);
        };
        for t in &entered {
            *self.active.entry(t.clone()).or_insert(0) += 1;
        }
        let outer = std::mem::replace(&mut self.explored, 0);
        let r = self.branches(flat, forbid);
        self.explored = outer;
        for t in &entered {
            *self.active.get_mut(t).expect("entered") -= 1;
        }
        r
    }

    /// Expands `anyOf` / `oneOf` groups, then generates the leaf.
    fn branches(&mut self, mut n: Node, forbid: &[String]) -> Result<Lang, SchemaError> {
        self.decide_enum(&mut n);
        self.lower_logic(&mut n)?;
        prune::dedup_groups(&mut n);
        self.prune_groups(&mut n, forbid);
        self.explore(&n.at)?;
        if let Some(group) = n.any_of.pop() {
            let rest_trivial = n.is_trivial();
            let mut parts = Vec::new();
            let mut len = 0;
            for b in &group {
                let r = if rest_trivial {
                    self.value(b, forbid)?
                } else {
                    self.merged_branch(&n, b, forbid)?
                };
                self.grow_alternation(&mut len, &r, &n.at)?;
                parts.extend(r);
            }
            return Ok(alt_all(parts));
        }
        if let Some(group) = n.one_of.pop() {
            return self.one_of(n, group, forbid);
        }
        if !n.some_extra.is_empty() {
            self.resolve_some_extra(&mut n, forbid)?;
            return self.branches(n, forbid);
        }
        self.leaf(&n, forbid)
    }

    /// An `enum`/`const` under applicators (`not`, `if`, `anyOf`, `oneOf`,
    /// dependencies): when every listed value can be validated against the
    /// whole node ([`eval`]), the node becomes the values that validate, and
    /// nothing needs a complement. Otherwise `n` is left as it is.
    #[inline(never)]
    fn decide_enum(&mut self, n: &mut Node) {
        let Some(vals) = &n.enumeration else {
            return;
        };
        let logic = !n.any_of.is_empty()
            || !n.one_of.is_empty()
            || !n.nots.is_empty()
            || !n.conditionals.is_empty()
            || !n.dependent_required.is_empty()
            || !n.dependent_schemas.is_empty();
        if !logic {
            return;
        }
        let mut ev = eval::Eval::new(self.doc);
        let mut kept = Vec::new();
        for v in vals {
            match ev.node(n, v, eval::Polarity::Pos) {
                Some(true) => kept.push(v.clone()),
                Some(false) => {}
                None => return,
            }
        }
        n.enumeration = Some(kept);
        // Strict mode infers types from the keywords: keep what the keywords
        // cleared below implied.
        if n.types.is_none() && self.opts.mode == JsonMode::Strict {
            let k = n.keyword_types();
            if !k.is_empty() {
                n.types = Some(k);
            }
        }
        n.any_of.clear();
        n.one_of.clear();
        n.nots.clear();
        n.conditionals.clear();
        n.dependent_required.clear();
        n.dependent_schemas.clear();
    }

    #[inline(never)]
    fn merged_branch(
        &mut self,
        base: &Node,
        b: &Schema,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        let mut entered = Vec::new();
        let Some(bn) = self.schema_node(b, &mut entered)? else {
            return Ok(None);
        };
        let merged = ir::merge(base, &bn)?;
        for t in &entered {
            *self.active.entry(t.clone()).or_insert(0) += 1;
        }
        let r = self.branches(merged, forbid);
        for t in &entered {
            *self.active.get_mut(t).expect("entered") -= 1;
        }
        r
    }

    /// The types a node generates (as in [`Gen::leaf`]).
    fn gen_types(&self, n: &Node) -> Types {
        if n.never {
            return Types::NONE;
        }
        let t = match n.types {
            Some(t) => t,
            None => match self.opts.mode {
                JsonMode::Strict => {
                    let k = n.keyword_types();
                    if k.is_empty() {
                        Types::ALL
                    } else {
                        k
                    }
                }
                JsonMode::Compliant => Types::ALL,
            },
        };
        let t = t.minus_not(n.not_types);
        match &n.enumeration {
            Some(vals) => vals
                .iter()
                .filter(|v| t.admits(v))
                .fold(Types::NONE, |e, v| e.union(Types::of(v))),
            None => t,
        }
    }

    /// The types a node *validates* (JSON Schema semantics).
    fn valid_types(n: &Node) -> Types {
        let t = n.types.unwrap_or(Types::ALL);
        match &n.enumeration {
            Some(vals) => t.intersect(vals.iter().fold(Types::NONE, |e, v| e.union(Types::of(v)))),
            None => t,
        }
    }

    fn object_only(&self, n: &Node) -> bool {
        let t = self.gen_types(n);
        t == Types::OBJECT && n.any_of.is_empty() && n.one_of.is_empty()
    }

    /// The schema extra keys get, or `None` when none are allowed.
    fn extras_schema(&self, n: &Node) -> Option<Schema> {
        match &n.additional {
            Some(Schema::Bool(false)) => None,
            Some(s) => Some(s.clone()),
            None => match self.opts.mode {
                // Strict: no extra keys beside declared ones; an object that
                // declares nothing is free-form.
                JsonMode::Strict
                    if n.properties.is_empty()
                        && n.pattern_properties.is_empty()
                        && n.required.is_empty() =>
                {
                    Some(Schema::Bool(true))
                }
                JsonMode::Strict => None,
                JsonMode::Compliant => Some(Schema::Bool(true)),
            },
        }
    }

    // ---------------------------------------------------------------- leaves

    fn leaf(&mut self, n: &Node, forbid: &[String]) -> Result<Lang, SchemaError> {
        if n.is_trivial() {
            return Ok(Some(self.any()));
        }
        if n.never {
            return Ok(None);
        }
        let mut all_forbid: Vec<String> = forbid.to_vec();
        for f in &n.forbid_keys {
            if !all_forbid.contains(f) {
                all_forbid.push(f.clone());
            }
        }
        let forbid = &all_forbid[..];
        let types = match n.types {
            Some(t) => t,
            None => match self.opts.mode {
                JsonMode::Strict => {
                    let k = n.keyword_types();
                    if k.is_empty() {
                        Types::ALL
                    } else {
                        k
                    }
                }
                JsonMode::Compliant => Types::ALL,
            },
        };
        let types = types.minus_not(n.not_types);
        if let Some(vals) = &n.enumeration {
            let mut parts = Vec::new();
            for v in vals {
                if !types.admits(v) {
                    continue;
                }
                // A listed object never writes a key this branch must not.
                if v.as_object()
                    .is_some_and(|o| forbid.iter().any(|k| o.contains_key(k)))
                {
                    continue;
                }
                let ok = satisfies(n, v)
                    .or_else(|| eval::Eval::new(self.doc).node(n, v, eval::Polarity::Pos));
                match ok {
                    Some(true) => parts.push(self.literal(v).into()),
                    Some(false) => {}
                    None => {
                        self.doc.soft(
                            SchemaError::UnsupportedValue {
                                what: "enum".into(),
                                pointer: n.at.clone(),
                                detail: "enum/const values together with array or object keywords"
                                    .into(),
                            },
                            self.opts.lenient,
                        )?;
                        parts.push(self.literal(v).into());
                    }
                }
            }
            return Ok(alt_all(parts));
        }
        if !n.not_values.is_empty() {
            return self.leaf_excluding(n, types, forbid);
        }
        let mut parts = Vec::new();
        if types.has(Types::NULL) {
            parts.push(Rx::from("null"));
        }
        if types.has(Types::BOOLEAN) {
            parts.push(Rx::from("(?:true|false)"));
        }
        if types.has_numeric() {
            parts.extend(self.number(n, types)?);
        }
        if types.has(Types::STRING) {
            parts.extend(self.string_with_algebra(n)?);
        }
        if types.has(Types::ARRAY) {
            parts.extend(self.array(n)?);
        }
        if types.has(Types::OBJECT) {
            parts.extend(self.object(n, forbid)?);
        }
        Ok(alt_all(parts))
    }
}

#[cfg(test)]
mod tests;

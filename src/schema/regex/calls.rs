//! # Recursive `$ref` as calls into the pushdown engine
//!
//! A regex cannot nest without bound, so the plain generator unrolls a
//! recursive `$ref` [`SchemaOptions::max_depth`] times and drops deeper
//! branches. When the compiler can use the pushdown engine ([`crate::pda`],
//! a vocabulary with every single byte), [`compile_fragments`] runs the same
//! generator with one change: a `$ref` whose target lies in a cycle of
//! references (the target is reachable from itself) is written as a **call
//! marker** `(?-u:\xF8\xHH\xLL)` — the bytes `0xF8 hi lo` the GBNF front end
//! uses ([`CALL_MARKER`]), which no UTF-8 text holds — and its target gets a
//! fragment of its own: its language generated once, with the same rule
//! inside it. Fragment 0 is the document; fragments `1..` are the recursive
//! targets in the order they were first called. `schema/pushdown.rs` parses
//! each text into an NFA or a syntax tree (`utf8(false)`, so the marker
//! bytes are allowed) and hands the set to [`Pda`](crate::pda::Pda)'s
//! build, the one the GBNF fragments go through. The recursion is then exact at any depth; the
//! return stack holds at most `max_depth + 1` frames (the document and
//! `max_depth` nested recursive references), and the engine names
//! `SchemaOptions::max_depth` when that limit is what stopped it.
//!
//! **Free-form values: one shared fragment.** With
//! [`SchemaOptions::free_form_calls`] (off by default: it moves every
//! schema with a free-form value to the pushdown engine, whose first
//! visits still cost more than the lazy index's), every free-form value
//! ("any JSON value": `{}`, `true`, items or values without a schema, the
//! compliant default of `additionalProperties`) is a call of one shared
//! fragment, [`ANY_VALUE`], instead of a copy bounded to
//! [`SchemaOptions::free_form_depth`] / [`SchemaOptions::extra_value_depth`]
//! containers: exact at any depth up to the stack limit (a MaskBench
//! instance with an extra key holding `[{...}]` is no longer rejected), and
//! the text no longer grows with each copy. Its masks are shared per
//! fragment state by the engine's split ([`crate::pda`]), so a value
//! nested anywhere costs what the fragment's own states cost.
//!
//! **Only where asked for: [`SchemaOptions::deep_free_form`].** A
//! schema with an *explicit* free-form value (`{}`, `true`, items without
//! a schema, an object that declares nothing: the generator notes one in
//! `Calls::explicit_free_form`) is written a second time with free-form
//! values as calls, and that text is kept unless it holds a member set
//! (an object's members in any order past the permutation regex): the
//! engine's fragments write those in declared order, and the copies keep
//! them exact. A schema whose only free-form values are compliant mode's
//! implicit extra-key values keeps the copies and the regular path.
//!
//! **Past the text limit: shared definitions.** When the text still runs
//! past [`SchemaOptions::shared_refs_len`] (at most
//! [`SchemaOptions::max_regex_len`]; definitions copied at each use), the
//! generator runs once more with every bare `$ref` a call of its target's
//! fragment, recursive or not. A definition copied at a hundred places is
//! then parsed, compiled to an NFA and determinized once: on MaskBench's
//! slowest files (Kubernetes schemas of 10 MB of regex text) the time to
//! first mask falls several-fold (`docs/performance.md`, "Shared
//! definitions past a lower text threshold"). A fragment is determinized whole, so the
//! compiler goes back to the regular path when a shared build runs past
//! a DFA limit ([`crate::Compiler`]).
//!
//! What stays unrolled, as before: a recursive `$ref` under `oneOf` made
//! disjoint by forbidden keys (its language depends on the caller), a
//! recursive `$ref` merged into `allOf`, and `not` over one. A schema in
//! which no call is met (no recursive reference, no free-form value)
//! compiles to exactly the regex
//! [`compile_document`](super::compile_document) writes.

use super::super::{CompiledSchema, Pointer, SchemaError, SchemaOptions, SchemaWarning};
use super::ir::{Document, Node, Schema};
use super::Gen;
use crate::pda::CALL_MARKER;
use serde_json::Value;
use std::collections::HashMap;

/// The name of the shared "any JSON value" fragment (no `$ref` target
/// is spelled so: targets are JSON Pointers or URIs).
pub const ANY_VALUE: &str = "(any JSON value)";

/// The recursive targets called so far.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    ids: HashMap<String, u16>,
    order: Vec<String>,
    /// Free-form values ("any JSON value") are calls to one shared
    /// fragment, [`ANY_VALUE`], instead of depth-bounded copies.
    free_calls: bool,
    /// Every bare `$ref` is a call of its target's fragment, recursive or
    /// not (the text ran past its limit).
    shared_refs: bool,
    /// An explicit free-form value was written (`{}`, `true`, items
    /// without a schema, an object that declares nothing), as a call or a
    /// copy: what [`SchemaOptions::deep_free_form`] looks for.
    pub(super) explicit_free_form: bool,
}

impl Calls {
    /// The call of the shared "any JSON value" fragment when free-form
    /// values are calls (queued on first use); `None` otherwise, or when
    /// the fragment ids ran out (then the caller writes the bounded copy).
    pub(super) fn any_value(&mut self) -> Option<String> {
        if !self.free_calls {
            return None;
        }
        if let Some(&id) = self.ids.get(ANY_VALUE) {
            return Some(marker(id));
        }
        let id = u16::try_from(self.order.len() + 1).ok()?;
        self.ids.insert(ANY_VALUE.to_string(), id);
        self.order.push(ANY_VALUE.to_string());
        Some(marker(id))
    }
}

/// What [`compile_fragments`] made of a schema.
#[derive(Debug)]
pub enum SchemaFragments {
    /// No recursive reference was met: the regex, exactly as
    /// [`compile`](crate::schema::compile) writes it.
    Regex(CompiledSchema),
    /// Fragment 0 is the document, fragment `i` the target `names[i]`;
    /// each body is regex text with call markers (`None`: the body admits
    /// no value).
    Fragments {
        /// Each fragment's name: `document` for fragment 0, else the JSON
        /// Pointer of its `$ref` target (or [`ANY_VALUE`]).
        names: Vec<String>,
        /// Each fragment's regex text, by index (`None`: no value).
        bodies: Vec<Option<String>>,
        /// What the compiler did not enforce or narrowed.
        warnings: Vec<SchemaWarning>,
    },
}

impl SchemaFragments {
    /// The text a reader sees for `--print-regex`: the regex itself, or one
    /// line per fragment, `NAME ::= REGEX`, the document first, each call
    /// written `(?call:NAME)` (no regex syntax has it) instead of its
    /// marker bytes, and `(no value)` for a fragment that admits none.
    pub fn display(&self) -> String {
        match self {
            SchemaFragments::Regex(c) => c.regex.clone(),
            SchemaFragments::Fragments { names, bodies, .. } => {
                // The document's own pointer is empty: written `#`.
                let shown = |n: &str| {
                    if n.is_empty() {
                        "#".to_string()
                    } else {
                        n.to_string()
                    }
                };
                let mut out = String::new();
                for (name, body) in names.iter().zip(bodies) {
                    let text = match body {
                        None => "(no value)".to_string(),
                        Some(b) => {
                            let mut t = b.clone();
                            // Longest ids first is not needed: a marker is
                            // a fixed-width escape of three bytes.
                            for (id, callee) in names.iter().enumerate().skip(1) {
                                t = t.replace(
                                    &marker(id as u16),
                                    &format!("(?call:{})", shown(callee)),
                                );
                            }
                            t
                        }
                    };
                    out.push_str(&shown(name));
                    out.push_str(" ::= ");
                    out.push_str(&text);
                    out.push('\n');
                }
                out.pop();
                out
            }
        }
    }
}

/// The regex text of a call to fragment `id`.
pub(crate) fn marker(id: u16) -> String {
    let [hi, lo] = id.to_be_bytes();
    format!("(?-u:\\x{CALL_MARKER:02X}\\x{hi:02X}\\x{lo:02X})")
}

impl Gen<'_, '_> {
    /// The call marker of `target` when it lies in a cycle of references
    /// (its fragment is queued on first use); `None` otherwise.
    pub(super) fn call(&mut self, target: &str) -> Result<Option<String>, SchemaError> {
        // When the text ran past its limit, every referenced definition is
        // a fragment too (generated once, not copied at each use).
        let shared = self.calls.as_ref().is_some_and(|c| c.shared_refs);
        if !shared && !self.reachable(target)?.contains(target) {
            return Ok(None);
        }
        let calls = self.calls.as_mut().expect("call mode");
        if let Some(&id) = calls.ids.get(target) {
            return Ok(Some(marker(id)));
        }
        let id = calls.order.len() + 1;
        let Ok(id) = u16::try_from(id) else {
            return Err(SchemaError::TooBig {
                what: "recursive $ref targets".into(),
                pointer: Pointer(crate::schema::ir::key_pointer(target).to_string()),
                size: id as u64,
                limit: u16::MAX as u64,
                knob: "the call marker's 16-bit fragment id",
            });
        };
        calls.ids.insert(target.to_string(), id);
        calls.order.push(target.to_string());
        Ok(Some(marker(id)))
    }
}

impl Gen<'_, '_> {
    /// The call of a node that is a bare `$ref` (annotations aside) to a
    /// recursive target; `None` for anything else.
    pub(super) fn ref_call(&mut self, n: &Node) -> Result<Option<String>, SchemaError> {
        let [Schema::Ref { target, .. }] = n.all_of.as_slice() else {
            return Ok(None);
        };
        let shared = self.calls.as_ref().is_some_and(|c| c.shared_refs);
        if !shared && !self.reachable(target)?.contains(target) {
            return Ok(None);
        }
        let mut rest = n.clone();
        rest.all_of.clear();
        if !rest.is_trivial() {
            return Ok(None);
        }
        self.call(target)
    }
}

impl Gen<'_, '_> {
    /// The body of the shared "any JSON value" fragment: a scalar, or an
    /// array or object whose values are calls of the fragment itself (the
    /// same text as a free-form value one container deep, in the schema's
    /// whitespace layout).
    fn any_value_body(&mut self) -> super::Rx {
        let v = self
            .calls
            .as_mut()
            .and_then(Calls::any_value)
            .expect("the fragment was queued by a call");
        self.containers_of(&v.into())
    }
}

/// Compiles `schema` for the pushdown engine: the document, each
/// recursive `$ref` target and (with [`SchemaOptions::free_form_calls`])
/// the shared "any JSON value" fragment ([`ANY_VALUE`]) as
/// fragments (see the module docs). When the regex text runs past
/// [`SchemaOptions::max_regex_len`], it is written again with free-form
/// values calls whatever the option says and every bare `$ref` a call of
/// its target's fragment.
///
/// Every text is plain regex syntax (the generator's one-copy constructs
/// written out, `crate::dfa::ordered`).
pub fn compile_fragments(
    schema: &Value,
    opts: &SchemaOptions,
) -> Result<SchemaFragments, SchemaError> {
    let opts = &opts.clone().unique_items_check(false);
    Ok(match compile_fragments_compact(schema, opts)? {
        SchemaFragments::Regex(c) => SchemaFragments::Regex(CompiledSchema {
            regex: super::plain_text(c.regex, opts)?,
            warnings: c.warnings,
        }),
        SchemaFragments::Fragments {
            names,
            bodies,
            warnings,
        } => SchemaFragments::Fragments {
            names,
            bodies: bodies
                .into_iter()
                .map(|b| b.map(|t| super::plain_text(t, opts)).transpose())
                .collect::<Result<_, _>>()?,
            warnings,
        },
    })
}

/// [`compile_fragments`] with the generator's one-copy constructs left in
/// the texts (`(?&SEP|K1|...|Kn)`, `(?*SEP|ITEM)`), for
/// [`crate::dfa::ByteDfa::build_schema`] and the pushdown build, which
/// write them out only where regex-syntax reads the text.
pub(crate) fn compile_fragments_compact(
    schema: &Value,
    opts: &SchemaOptions,
) -> Result<SchemaFragments, SchemaError> {
    // Past `shared_refs_len` (below `max_regex_len`), the first pass
    // stops early and the text is written again with shared definitions.
    let early;
    let first = if opts.shared_refs_len < opts.max_regex_len {
        early = SchemaOptions {
            max_regex_len: opts.shared_refs_len,
            ..opts.clone()
        };
        &early
    } else {
        opts
    };
    // The limit stands for the text written out (one-copy constructs copied),
    // as before the compact construct: the same schemas take the shared
    // path. Where that path fails too, a single compact text (within the
    // limit as it stands) is kept: the direct NFA reads it as it is.
    let plain_fits = |w: &Written, limit: usize| w.plain.iter().all(|&n| n <= limit);
    let mut free_calls = opts.free_form_calls;
    let mut written = fragments_with(schema, first, free_calls, false);
    if let Ok(w) = &written {
        if w.explicit && opts.deep_free_form && !free_calls && plain_fits(w, first.max_regex_len) {
            // An explicit free-form value: written again as calls, kept
            // when no object's members lose their any order there.
            if let Ok(calls) = fragments_with(schema, first, true, false) {
                if !calls.fragments.has_member_set() {
                    free_calls = true;
                    written = Ok(calls);
                }
            }
        }
    }
    match written {
        Err(SchemaError::TooBig {
            knob: "max_regex_len",
            ..
        }) => fragments_with(schema, opts, true, true).map(|w| w.fragments),
        Ok(w) if !plain_fits(&w, first.max_regex_len) => {
            match fragments_with(schema, opts, true, true) {
                Ok(s) if plain_fits(&s, opts.max_regex_len) => Ok(s.fragments),
                _ if matches!(w.fragments, SchemaFragments::Regex(_)) => Ok(w.fragments),
                shared => shared.map(|s| s.fragments),
            }
        }
        Ok(w) if free_calls && w.fragments.text_len() > FREE_FORM_CHECK_LEN => {
            let f = w.fragments;
            // A large text with calls: shared definitions may make it far
            // smaller (a Kubernetes schema: 14 MB with the definitions
            // copied, 0.6 MB shared, and seconds against milliseconds to
            // compile).
            match fragments_with(schema, opts, true, true).map(|w| w.fragments) {
                Ok(regular) if regular.text_len().saturating_mul(2) < f.text_len() => Ok(regular),
                _ => Ok(f),
            }
        }
        r => r.map(|w| w.fragments),
    }
}

/// Past this much text with free-form values as calls, the text with every
/// bare `$ref` a call too is written, and kept when it is less than half.
const FREE_FORM_CHECK_LEN: usize = 256 << 10;

impl SchemaFragments {
    /// Whether some fragment holds a member set (an object's members in
    /// any order, [`crate::dfa::ordered::SET_OPEN`]): the pushdown engine's
    /// fragments write those in declared order, so free-form values as
    /// calls would narrow that object. (A pattern's escaped `\\(?%` reads
    /// so too: then the copies are kept, which is never less exact.)
    fn has_member_set(&self) -> bool {
        match self {
            SchemaFragments::Regex(_) => false,
            SchemaFragments::Fragments { bodies, .. } => bodies
                .iter()
                .flatten()
                .any(|b| b.contains(crate::dfa::ordered::SET_OPEN)),
        }
    }

    /// Bytes of regex text in all.
    fn text_len(&self) -> usize {
        match self {
            SchemaFragments::Regex(c) => c.regex.len(),
            SchemaFragments::Fragments { bodies, .. } => {
                bodies.iter().flatten().map(String::len).sum()
            }
        }
    }
}

/// [`compile_fragments`], free-form values as calls when `free_calls`,
/// every bare `$ref` a call when `shared_refs`; with whether an explicit
/// free-form value was met.
/// What [`fragments_with`] wrote.
struct Written {
    fragments: SchemaFragments,
    /// Whether an explicit free-form value was met.
    explicit: bool,
    /// Each text's length with its one-copy constructs written out (the
    /// regex's, or each body's that admits a value).
    plain: Vec<usize>,
}

fn fragments_with(
    schema: &Value,
    opts: &SchemaOptions,
    free_calls: bool,
    shared_refs: bool,
) -> Result<Written, SchemaError> {
    // `$ref`s to the meta-schemas resolve to the bundled copies.
    let schema = crate::schema::documents::bundle(schema, &Default::default());
    super::super::escapes::check(&schema, opts.allowed_escapes)?;
    let doc = Document::new(&schema, opts);
    let root = doc.root()?;
    let mut g = Gen::new(&doc);
    g.calls = Some(Calls {
        free_calls,
        shared_refs,
        ..Calls::default()
    });
    let top = g.value(&root, &[])?;
    let explicit = g.calls.as_ref().is_some_and(|c| c.explicit_free_form);
    if g.calls.as_ref().is_some_and(|c| c.order.is_empty()) {
        let Some(regex) = top else {
            return Err(SchemaError::Empty {
                pointer: Pointer::root(),
                detail: format!(
                    " (recursion unrolled to depth {}, free-form depth {})",
                    opts.max_depth, opts.free_form_depth
                ),
            });
        };
        return Ok(Written {
            plain: vec![regex.plain_len()],
            fragments: SchemaFragments::Regex(CompiledSchema {
                regex: regex.text(),
                warnings: doc.warnings.take(),
            }),
            explicit,
        });
    }
    let mut names = vec!["document".to_string()];
    let mut bodies = vec![top];
    let mut i = 0;
    while let Some(t) = g.calls.as_ref().and_then(|c| c.order.get(i).cloned()) {
        if t == ANY_VALUE {
            bodies.push(Some(g.any_value_body()));
            names.push(t);
            i += 1;
            continue;
        }
        *g.active.entry(t.clone()).or_insert(0) += 1;
        let body = doc.get(&t).and_then(|s| g.value(&s, &[]));
        *g.active.get_mut(&t).expect("entered") -= 1;
        bodies.push(body?);
        names.push(t);
        i += 1;
    }
    Ok(Written {
        plain: bodies.iter().flatten().map(super::Rx::plain_len).collect(),
        fragments: SchemaFragments::Fragments {
            names,
            bodies: bodies.into_iter().map(|b| b.map(|r| r.text())).collect(),
            warnings: doc.warnings.take(),
        },
        explicit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::JsonMode;
    use serde_json::json;

    /// The lengths written out that the pieces carry are the ones a scan
    /// of the text finds: optional members, arrays, member sets, nested in
    /// each other, with and without calls.
    #[test]
    fn plain_lengths_agree_with_the_text() {
        let item = json!({"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}},
            "c": {"type": "object", "properties": {"x": {"type": "boolean"}, "y": {"type": "null"}}}}});
        let many: serde_json::Map<String, Value> = (0..45)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        let schemas = [
            item.clone(),
            json!({"type": "array", "items": item}),
            json!({"type": "object", "properties": many}),
            json!({"$defs": {"t": {"type": "object", "properties": {
                "v": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
                "$ref": "#/$defs/t"}),
            json!({"type": "object", "required": ["a"], "properties": {
                "a": {}, "b": {"type": "array"}, "c": {"type": "object"}}}),
        ];
        for schema in &schemas {
            for mode in [JsonMode::Strict, JsonMode::Compliant] {
                for (free, shared) in [(false, false), (true, false), (true, true)] {
                    let opts = SchemaOptions {
                        mode,
                        ..Default::default()
                    };
                    let w = fragments_with(schema, &opts, free, shared).expect("compiles");
                    let texts: Vec<&String> = match &w.fragments {
                        SchemaFragments::Regex(c) => vec![&c.regex],
                        SchemaFragments::Fragments { bodies, .. } => {
                            bodies.iter().flatten().collect()
                        }
                    };
                    assert_eq!(texts.len(), w.plain.len());
                    for (t, &n) in texts.iter().zip(&w.plain) {
                        let scanned = crate::dfa::ordered::expanded_len(t, usize::MAX).unwrap();
                        assert_eq!(n, scanned, "{mode:?} {free} {shared}: {schema}");
                    }
                    let constructs = texts.iter().any(|t| t.contains(crate::dfa::ordered::OPEN));
                    if mode == JsonMode::Strict && schema == &schemas[2] {
                        assert!(constructs, "the test meets the ordered construct");
                    }
                }
            }
        }
    }
}

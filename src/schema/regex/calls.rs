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
//! targets in the order they were first called. The compiler parses each
//! text into a syntax tree (`utf8(false)`, so the marker bytes are allowed)
//! and hands the set to [`Pda::build_with`](crate::pda::Pda), the build the
//! GBNF fragments go through. The recursion is then exact at any depth; the
//! return stack holds at most `max_depth + 1` frames (the document and
//! `max_depth` nested recursive references), and the engine names
//! `SchemaOptions::max_depth` when that limit is what stopped it.
//!
//! What stays unrolled, as before: a recursive `$ref` under `oneOf` made
//! disjoint by forbidden keys (its language depends on the caller), a
//! recursive `$ref` merged into `allOf`, and `not` over one. A schema in
//! which no recursive reference is met compiles to exactly the regex
//! [`compile_document`](super::compile_document) writes.

use super::super::{CompiledSchema, Pointer, SchemaError, SchemaOptions, SchemaWarning};
use super::ir::{Document, Node, Schema};
use super::Gen;
use crate::grammar::gbnf::lower::CALL_MARKER;
use serde_json::Value;
use std::collections::HashMap;

/// The recursive targets called so far.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    ids: HashMap<String, u16>,
    order: Vec<String>,
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
        names: Vec<String>,
        bodies: Vec<Option<String>>,
        warnings: Vec<SchemaWarning>,
    },
}

/// The regex text of a call to fragment `id`.
fn marker(id: u16) -> String {
    let [hi, lo] = id.to_be_bytes();
    format!("(?-u:\\x{CALL_MARKER:02X}\\x{hi:02X}\\x{lo:02X})")
}

impl Gen<'_, '_> {
    /// The call marker of `target` when it lies in a cycle of references
    /// (its fragment is queued on first use); `None` otherwise.
    pub(super) fn call(&mut self, target: &str) -> Result<Option<String>, SchemaError> {
        if !self.reachable(target)?.contains(target) {
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
                pointer: Pointer(target.to_string()),
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
        if !self.reachable(target)?.contains(target) {
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

/// Compiles `schema` for the pushdown engine: the document and each
/// recursive `$ref` target as a fragment (see the module docs).
pub fn compile_fragments(
    schema: &Value,
    opts: &SchemaOptions,
) -> Result<SchemaFragments, SchemaError> {
    let doc = Document::new(schema, opts);
    let root = doc.root()?;
    let mut g = Gen::new(&doc);
    g.calls = Some(Calls::default());
    let top = g.value(&root, &[])?;
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
        return Ok(SchemaFragments::Regex(CompiledSchema {
            regex,
            warnings: doc.warnings.take(),
        }));
    }
    let mut names = vec!["document".to_string()];
    let mut bodies = vec![top];
    let mut i = 0;
    while let Some(t) = g.calls.as_ref().and_then(|c| c.order.get(i).cloned()) {
        *g.active.entry(t.clone()).or_insert(0) += 1;
        let body = doc.get(&t).and_then(|s| g.value(&s, &[]));
        *g.active.get_mut(&t).expect("entered") -= 1;
        bodies.push(body?);
        names.push(t);
        i += 1;
    }
    Ok(SchemaFragments::Fragments {
        names,
        bodies,
        warnings: doc.warnings.take(),
    })
}

//! # Building IR nodes for the boolean algebra
//!
//! Small constructors the complement and the counted `contains` share:
//! [`blank`] (a node with only its pointer), [`conj`] / [`disj`] (a
//! conjunction / disjunction of schemas, simplified around `true` and
//! `false`), and [`complement_types`] (a type set's complement among JSON
//! values). Pure functions over [`ir`] values.

use crate::schema::ir::{Node, Schema, Types};
use crate::schema::Pointer;

/// A node with only `at` set.
pub(super) fn blank(at: &Pointer) -> Node {
    Node {
        at: at.clone(),
        ..Default::default()
    }
}

/// The conjunction of `parts` (`true` when empty).
pub(super) fn conj(at: &Pointer, parts: Vec<Schema>) -> Schema {
    let parts: Vec<Schema> = parts
        .into_iter()
        .filter(|p| !matches!(p, Schema::Bool(true)))
        .collect();
    if parts.iter().any(|p| matches!(p, Schema::Bool(false))) {
        return Schema::Bool(false);
    }
    match parts.len() {
        0 => Schema::Bool(true),
        1 => parts.into_iter().next().expect("one"),
        _ => Schema::Node(std::sync::Arc::new(Node {
            all_of: parts,
            ..blank(at)
        })),
    }
}

/// The disjunction of `parts` (`false` when empty).
pub(super) fn disj(at: &Pointer, parts: Vec<Schema>) -> Schema {
    if parts.iter().any(|p| matches!(p, Schema::Bool(true))) {
        return Schema::Bool(true);
    }
    let parts: Vec<Schema> = parts
        .into_iter()
        .filter(|p| !matches!(p, Schema::Bool(false)))
        .collect();
    match parts.len() {
        0 => Schema::Bool(false),
        1 => parts.into_iter().next().expect("one"),
        _ => Schema::Node(std::sync::Arc::new(Node {
            any_of: vec![parts],
            ..blank(at)
        })),
    }
}

pub(super) fn node(n: Node) -> Schema {
    Schema::Node(std::sync::Arc::new(n))
}

/// The complement of a type set among JSON values, and whether it includes
/// the non-integer numbers (`integer` without `number` in `t`).
pub(super) fn complement_types(t: Types) -> (Types, bool) {
    let mut bits = Types::ALL.0 & !t.0;
    let fractional = t.has(Types::INTEGER) && !t.has(Types::NUMBER);
    if t.has_numeric() {
        bits &= !(Types::INTEGER.0 | Types::NUMBER.0);
    }
    (Types(bits), fractional)
}

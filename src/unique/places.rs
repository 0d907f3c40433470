//! The places of the checked arrays: a trie over instance paths.

use crate::vocab::{TokenId, Vocabulary};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Which arrays of the document must hold distinct items: a graph of the
/// schemas that apply at each place (node 0 the document's own), with
/// edges for object keys, undeclared keys and items, so that a recursive
/// schema is a cycle.
#[derive(Debug, Default)]
pub struct UniqueItems {
    pub(super) nodes: Vec<PathNode>,
    /// Per first byte, the tokens spelled starting with it (made on first
    /// use, per vocabulary).
    pub(super) by_first_byte: OnceLock<Tables>,
}

/// Tokens by what they hold, for the tokens worth trying.
#[derive(Debug, Default)]
pub(super) struct Tables {
    pub(super) first: Vec<Vec<TokenId>>,
    /// Tokens with a `"` anywhere (one may close a string item).
    pub(super) quoted: Vec<TokenId>,
    /// Tokens with a `,` anywhere (one may hold two items).
    pub(super) commas: Vec<TokenId>,
    /// Tokens with a `"` and then a `,` (inside a string, one may hold
    /// two items).
    pub(super) quoted_commas: Vec<TokenId>,
}

/// The values a checked array's items may take.
#[derive(Debug, Default, Clone)]
pub(super) enum Listed {
    /// No schema said yet.
    #[default]
    Unset,
    /// Exactly these (canonical forms, sorted).
    Known(Arc<Vec<Box<[u8]>>>),
    /// Not listed, or listed differently by two schemas.
    Unknown,
}

#[derive(Debug, Default, Clone)]
pub(super) struct PathNode {
    /// The schema's `properties`: the node of each member's schema.
    pub(super) keys: HashMap<String, u32>,
    /// The schema's `patternProperties`: per pattern (searched, as JSON
    /// Schema reads it), the node of the members whose key it matches.
    pub(super) patterns: Vec<(Arc<crate::schema::pattern::KeyMatcher>, u32)>,
    /// The keys the schema does not declare and no pattern of it matches
    /// (its `additionalProperties`): the declared names, sorted, and the
    /// node.
    pub(super) others: Option<(Vec<String>, u32)>,
    /// The schema of every item.
    pub(super) items: Option<u32>,
    /// Schemas that apply at the same place (`allOf`, `$ref`, a lone
    /// array branch of `anyOf` / `oneOf`).
    pub(super) also: Vec<u32>,
    /// This node and every node its `also` reaches (made by `finish`).
    pub(super) closure: Vec<u32>,
    pub(super) unique: bool,
    /// The largest `minItems` of the checked arrays here.
    pub(super) min_items: u64,
    /// The values the items may take, where the schema lists them
    /// (canonical forms, sorted).
    pub(super) listed: Listed,
}

impl UniqueItems {
    /// A graph with only the document's schema (node 0), unchecked.
    pub fn new() -> UniqueItems {
        UniqueItems {
            nodes: vec![PathNode::default()],
            by_first_byte: OnceLock::new(),
        }
    }

    /// A new node: one schema, applying where its edges say.
    pub fn node(&mut self) -> u32 {
        self.nodes.push(PathNode::default());
        (self.nodes.len() - 1) as u32
    }

    /// Member `key` of an object at `at` has the schema of `child`.
    pub fn add_key(&mut self, at: u32, key: &str, child: u32) {
        self.nodes[at as usize].keys.insert(key.to_string(), child);
    }

    /// The members of an object at `at` whose key `pattern` matches have
    /// the schema of `child` (besides any other that applies to them).
    pub(crate) fn add_pattern(
        &mut self,
        at: u32,
        pattern: Arc<crate::schema::pattern::KeyMatcher>,
        child: u32,
    ) {
        self.nodes[at as usize].patterns.push((pattern, child));
    }

    /// The keys of an object at `at` not among `declared` (nor matched by
    /// one of its patterns) have the schema of `child`.
    pub fn add_other(&mut self, at: u32, mut declared: Vec<String>, child: u32) {
        declared.sort();
        self.nodes[at as usize].others = Some((declared, child));
    }

    /// Every item of an array at `at` has the schema of `child`.
    pub fn add_items(&mut self, at: u32, child: u32) {
        self.nodes[at as usize].items = Some(child);
    }

    /// Where `at` applies, `other` applies too.
    pub fn add_also(&mut self, at: u32, other: u32) {
        if at != other && !self.nodes[at as usize].also.contains(&other) {
            self.nodes[at as usize].also.push(other);
        }
    }

    /// Computes the closures of `also` (call once every edge is in).
    pub fn finish(&mut self) {
        for n in 0..self.nodes.len() {
            let mut seen = vec![n as u32];
            let mut i = 0;
            while i < seen.len() {
                let m = seen[i] as usize;
                for &o in &self.nodes[m].also {
                    if !seen.contains(&o) {
                        seen.push(o);
                    }
                }
                i += 1;
            }
            seen.sort_unstable();
            self.nodes[n].closure = seen;
        }
    }

    /// Marks the array at `at` as one of distinct items.
    ///
    /// `listed`: the values the items may take, where the schema lists
    /// them (canonical forms: strings decoded, numbers as exact decimals,
    /// keys sorted): the search
    /// for a new item is then a lookup.
    pub fn mark(&mut self, at: u32, min_items: u64, listed: Option<Vec<Box<[u8]>>>) {
        let n = &mut self.nodes[at as usize];
        n.unique = true;
        n.min_items = n.min_items.max(min_items);
        n.listed = match (std::mem::take(&mut n.listed), listed) {
            (Listed::Unset, Some(mut v)) => {
                v.sort();
                v.dedup();
                Listed::Known(Arc::new(v))
            }
            (Listed::Known(k), Some(mut v)) => {
                v.sort();
                v.dedup();
                if *k == v {
                    Listed::Known(k)
                } else {
                    Listed::Unknown
                }
            }
            _ => Listed::Unknown,
        };
    }

    /// Whether an array where `at` applies is checked (by `at` or a
    /// schema that applies with it; after [`Self::finish`]).
    pub fn closure_unique(&self, at: u32) -> bool {
        self.nodes[at as usize]
            .closure
            .iter()
            .any(|&n| self.nodes[n as usize].unique)
    }

    /// Whether no array is checked.
    pub fn is_empty(&self) -> bool {
        !self.nodes.iter().any(|n| n.unique)
    }

    /// The most tokens a budget may need beyond the index's bound: two per
    /// item a checked array still needs, plus two for the open item.
    pub fn max_slack(&self) -> u32 {
        self.nodes
            .iter()
            .filter(|n| n.unique)
            .map(|n| 2 * (n.min_items.min(1 << 20) as u32 + 1))
            .sum()
    }

    /// The nodes at member `key` of an object at the nodes `at`.
    pub(super) fn child_key(&self, at: &[u32], key: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        if at.iter().all(|&n| {
            let node = &self.nodes[n as usize];
            node.keys.is_empty() && node.others.is_none() && node.patterns.is_empty()
        }) {
            return out;
        }
        let Ok(k) = serde_json::from_slice::<String>(key) else {
            return out;
        };
        for &n in at {
            let node = &self.nodes[n as usize];
            if let Some(&c) = node.keys.get(&k) {
                out.extend_from_slice(&self.nodes[c as usize].closure);
            }
            let mut matched = false;
            for (re, c) in &node.patterns {
                if re.is_match(&k) {
                    matched = true;
                    out.extend_from_slice(&self.nodes[*c as usize].closure);
                }
            }
            if let Some((declared, c)) = &node.others {
                if !matched && declared.binary_search(&k).is_err() {
                    out.extend_from_slice(&self.nodes[*c as usize].closure);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The nodes at every item of an array at the nodes `at`.
    pub(super) fn child_items(&self, at: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        for &n in at {
            if let Some(c) = self.nodes[n as usize].items {
                out.extend_from_slice(&self.nodes[c as usize].closure);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The nodes of the document's own value.
    pub(super) fn root(&self) -> Vec<u32> {
        self.nodes[0].closure.clone()
    }

    /// Whether the array at these nodes is checked: its `minItems` and
    /// the values its items may take, where known.
    pub(super) fn unique_at(&self, at: &[u32]) -> Option<(u64, Option<Arc<Vec<Box<[u8]>>>>)> {
        let mut out: Option<(u64, Option<Arc<Vec<Box<[u8]>>>>)> = None;
        for &n in at {
            let node = &self.nodes[n as usize];
            if !node.unique {
                continue;
            }
            let listed = match &node.listed {
                Listed::Known(v) => Some(v.clone()),
                _ => None,
            };
            out = Some(match out {
                None => (node.min_items, listed),
                Some((m, l)) => (
                    m.max(node.min_items),
                    l.filter(|l| listed.as_ref() == Some(l)),
                ),
            });
        }
        // Listed values speak for the items only where no other schema
        // here says more of them.
        if at
            .iter()
            .filter(|&&n| self.nodes[n as usize].items.is_some())
            .count()
            > 1
        {
            if let Some((_, l)) = &mut out {
                *l = None;
            }
        }
        out
    }

    pub(super) fn tables(&self, vocab: &Vocabulary) -> &Tables {
        self.by_first_byte.get_or_init(|| {
            let mut t = Tables {
                first: vec![Vec::new(); 256],
                ..Tables::default()
            };
            for (id, s) in vocab.spellings() {
                if let Some(&b) = s.first() {
                    t.first[b as usize].push(id);
                }
                if s.contains(&b'"') {
                    t.quoted.push(id);
                }
                if s.contains(&b',') {
                    t.commas.push(id);
                }
                if let Some(q) = s.iter().position(|&b| b == b'"') {
                    if s[q..].contains(&b',') {
                        t.quoted_commas.push(id);
                    }
                }
            }
            t
        })
    }
}

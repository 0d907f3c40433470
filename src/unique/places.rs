//! The places of the checked arrays: a trie over instance paths.

use crate::vocab::{TokenId, Vocabulary};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Which arrays of the document must hold distinct items: a trie over
/// instance paths, node 0 the document's own value.
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
    pub(super) keys: HashMap<String, u32>,
    /// The keys an object schema here does not declare (its
    /// `additionalProperties`): the declared names, and the node.
    pub(super) others: Vec<(Vec<String>, u32)>,
    pub(super) items: Option<u32>,
    pub(super) unique: bool,
    /// The largest `minItems` of the checked arrays here.
    pub(super) min_items: u64,
    /// The values the items may take, where the schema lists them
    /// (canonical forms, sorted).
    pub(super) listed: Listed,
}

impl UniqueItems {
    /// A trie with only the document's value, unchecked.
    pub fn new() -> UniqueItems {
        UniqueItems {
            nodes: vec![PathNode::default()],
            by_first_byte: OnceLock::new(),
        }
    }

    /// The node for member `key` of the object at `at`.
    pub fn key(&mut self, at: u32, key: &str) -> u32 {
        if let Some(&n) = self.nodes[at as usize].keys.get(key) {
            return n;
        }
        let n = self.nodes.len() as u32;
        self.nodes.push(PathNode::default());
        self.nodes[at as usize].keys.insert(key.to_string(), n);
        n
    }

    /// The node for the keys of the object at `at` that are not among
    /// `declared` (one schema's `additionalProperties`).
    pub fn other(&mut self, at: u32, mut declared: Vec<String>) -> u32 {
        declared.sort();
        if let Some((_, n)) = self.nodes[at as usize]
            .others
            .iter()
            .find(|(d, _)| *d == declared)
        {
            return *n;
        }
        let n = self.nodes.len() as u32;
        self.nodes.push(PathNode::default());
        self.nodes[at as usize].others.push((declared, n));
        n
    }

    /// The node for every item of the array at `at`.
    pub fn items(&mut self, at: u32) -> u32 {
        if let Some(n) = self.nodes[at as usize].items {
            return n;
        }
        let n = self.nodes.len() as u32;
        self.nodes.push(PathNode::default());
        self.nodes[at as usize].items = Some(n);
        n
    }

    /// Marks the array at `at` as one of distinct items.
    ///
    /// `listed`: the values the items may take, where the schema lists
    /// them (canonical forms, [`canonical`](super::canonical)): the search
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

    /// Whether the array at `at` is checked.
    pub fn is_unique(&self, at: u32) -> bool {
        self.nodes[at as usize].unique
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

    pub(super) fn child_key(&self, at: &[u32], key: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        if at.iter().all(|&n| {
            self.nodes[n as usize].keys.is_empty() && self.nodes[n as usize].others.is_empty()
        }) {
            return out;
        }
        let Ok(k) = serde_json::from_slice::<String>(key) else {
            return out;
        };
        for &n in at {
            let node = &self.nodes[n as usize];
            out.extend(node.keys.get(&k));
            for (declared, c) in &node.others {
                if declared.binary_search(&k).is_err() {
                    out.push(*c);
                }
            }
        }
        out
    }

    pub(super) fn child_items(&self, at: &[u32]) -> Vec<u32> {
        at.iter()
            .filter_map(|&n| self.nodes[n as usize].items)
            .collect()
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

//! Shared helpers for the schema tests: a `json.dumps`-compatible serializer,
//! the `jsonschema` oracle, and random walks over a byte DFA.
#![allow(dead_code)]

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::schema::{self, CompiledSchema, JsonMode, SchemaOptions, Whitespace};
use rand::{Rng, SeedableRng};
use regex_automata::util::primitives::StateID;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

pub mod logic;

/// Python's `json.dumps(v)` (separators `", "`, `": "`, ensure_ascii=False),
/// as the MaskBench runner writes instances.
pub use constrain_testkit::maskbench::python_dumps as py_dumps;

/// The text of an instance under a whitespace policy.
pub fn render(v: &Value, ws: Whitespace) -> String {
    match ws {
        Whitespace::Compact => compact(v),
        Whitespace::Python | Whitespace::Flexible { .. } => py_dumps(v),
    }
}

/// Compact rendering that is safe for any string content.
pub fn compact(v: &Value) -> String {
    let mut out = String::new();
    write_compact(v, &mut out);
    out
}

fn write_compact(v: &Value, out: &mut String) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&schema::regex::py_string(k));
                out.push(':');
                write_compact(x, out);
            }
            out.push('}');
        }
        other => out.push_str(&py_dumps(other)),
    }
}

/// The independent oracle: `jsonschema` with format validation on.
pub struct Oracle(jsonschema::Validator);

impl Oracle {
    pub fn new(schema: &Value) -> Option<Oracle> {
        jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .ok()
            .map(Oracle)
    }
    pub fn valid(&self, v: &Value) -> bool {
        self.0.is_valid(v)
    }
}

pub fn opts(ws: Whitespace, mode: JsonMode) -> SchemaOptions {
    SchemaOptions::default().whitespace(ws).mode(mode)
}

pub fn dfa(c: &CompiledSchema) -> ByteDfa {
    ByteDfa::new(&c.regex, &DfaConfig::default()).expect("schema regex builds a DFA")
}

/// Live-state analysis for random walks: distance to acceptance per state.
pub struct Walker<'a> {
    dfa: &'a ByteDfa,
    reps: Vec<u8>,
    dist: HashMap<StateID, u32>,
}

impl<'a> Walker<'a> {
    pub fn new(dfa: &'a ByteDfa) -> Walker<'a> {
        let classes = dfa.byte_classes();
        let mut seen = [false; 256];
        let mut reps = Vec::new();
        for b in 0..=255u8 {
            if !seen[classes[b as usize] as usize] {
                seen[classes[b as usize] as usize] = true;
                reps.push(b);
            }
        }
        // Forward reachability, then reverse BFS from accepting states.
        let mut states = vec![dfa.start()];
        let mut idx: HashMap<StateID, usize> = HashMap::new();
        idx.insert(dfa.start(), 0);
        let mut edges: Vec<Vec<usize>> = Vec::new();
        let mut i = 0;
        while i < states.len() {
            let s = states[i];
            let mut out = Vec::new();
            for &b in &reps {
                let n = dfa.next(s, b);
                if dfa.is_dead(n) {
                    continue;
                }
                let j = *idx.entry(n).or_insert_with(|| {
                    states.push(n);
                    states.len() - 1
                });
                out.push(j);
            }
            edges.push(out);
            i += 1;
        }
        let mut rev: Vec<Vec<usize>> = vec![Vec::new(); states.len()];
        for (a, outs) in edges.iter().enumerate() {
            for &b in outs {
                rev[b].push(a);
            }
        }
        let mut dist: HashMap<StateID, u32> = HashMap::new();
        let mut q = VecDeque::new();
        for (k, &s) in states.iter().enumerate() {
            if dfa.is_accepting(s) {
                dist.insert(s, 0);
                q.push_back(k);
            }
        }
        while let Some(k) = q.pop_front() {
            let d = dist[&states[k]];
            for &p in &rev[k] {
                if !dist.contains_key(&states[p]) {
                    dist.insert(states[p], d + 1);
                    q.push_back(p);
                }
            }
        }
        Walker { dfa, reps, dist }
    }

    /// All bytes (not just class representatives) that keep acceptance reachable.
    fn live_bytes(&self, s: StateID) -> Vec<(u8, u32)> {
        let mut v = Vec::new();
        for b in 0..=255u8 {
            let n = self.dfa.next(s, b);
            if let Some(&d) = self.dist.get(&n) {
                v.push((b, d));
            }
        }
        v
    }

    /// A random text of the language: random live bytes, steering towards
    /// acceptance once past `soft_len` bytes.
    pub fn walk(&self, rng: &mut impl Rng, soft_len: usize) -> Option<Vec<u8>> {
        let mut s = self.dfa.start();
        self.dist.get(&s)?;
        let mut out = Vec::new();
        loop {
            if self.dfa.is_accepting(s) {
                let p = if out.len() > soft_len { 0.9 } else { 0.15 };
                if rng.random_bool(p) {
                    return Some(out);
                }
            }
            let live = self.live_bytes(s);
            if live.is_empty() {
                return if self.dfa.is_accepting(s) {
                    Some(out)
                } else {
                    None
                };
            }
            let choice = if out.len() > soft_len {
                let best = live.iter().map(|x| x.1).min().unwrap();
                let cands: Vec<_> = live.iter().filter(|x| x.1 == best).collect();
                *cands[rng.random_range(0..cands.len())]
            } else {
                // Prefer ASCII so that texts stay readable, but not always.
                let ascii: Vec<_> = live.iter().filter(|x| x.0 < 0x80).collect();
                if !ascii.is_empty() && rng.random_bool(0.9) {
                    *ascii[rng.random_range(0..ascii.len())]
                } else {
                    live[rng.random_range(0..live.len())]
                }
            };
            out.push(choice.0);
            s = self.dfa.next(s, choice.0);
            if out.len() > soft_len * 20 + 10_000 {
                return None;
            }
        }
    }

    pub fn reps(&self) -> &[u8] {
        &self.reps
    }
}

pub fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// `../shared/corpora/<name>` if present.
pub fn corpus(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
        .join("corpora")
        .join(name);
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: corpus {} not found", p.display());
        None
    }
}

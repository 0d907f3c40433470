//! # `uniqueItems` checked at run time
//!
//! Arrays of distinct strings or numbers are not a regular language, so the
//! schema compiler cannot write them into an automaton. Where a schema asks
//! for them, the automaton keeps the array without the check and the
//! [`crate::Matcher`] adds it: a [`UniqueItems`] beside the index says, as a
//! trie over instance paths (object keys and "any item"), which arrays must
//! hold distinct items, and each matcher reads its own output with a small
//! JSON scanner ([`Scan`]) that knows where it stands in that trie, keeps the
//! items of every open checked array in canonical form (strings decoded,
//! numbers as exact decimals so `1`, `1.0` and `10e-1` are one value, object
//! keys sorted), and
//!
//! * refuses a token whose bytes complete an item equal to an earlier one of
//!   the same array;
//! * refuses a token that leaves an item unfinished where every way to
//!   finish it is a duplicate (an item `"ab` with `maxLength: 2` when `"ab"`
//!   was written), or that writes a comma where no new item is left (eight
//!   one-letter strings of `^[a-h]$` written): a bounded search over the index's own byte steps, in
//!   order of the fewest bytes to acceptance, looks for one completion that
//!   is new. Past [`LOOKAHEAD_NODES`] steps the token is refused (sound; it
//!   only narrows).
//!
//! The mask is the index's mask with those tokens removed. Only tokens that
//! may matter are tried: inside a string item whose text so far starts no
//! earlier item, nothing is; inside one that does, the tokens starting with
//! the next byte of such an item, a backslash or a quote (the item can close
//! in the token); elsewhere in a checked array, every allowed token. Outside
//! checked arrays, or while no item was written, the index's mask stands as
//! it is. The schema compiler only hands an array to this check where the
//! path alone decides that the array is checked (see
//! `schema::unique_sites`).

use crate::index::{StateId, TokenIndex};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

/// Most byte steps the search for a new completion of an item may take per
/// token before the token is refused.
pub const LOOKAHEAD_NODES: usize = 4096;

/// The order the search tries bytes in: those that end an item or a string
/// first, then printable ASCII, then the rest.
const BYTE_ORDER: [u8; 256] = {
    let first = *b"\",]} 0a";
    let mut out = [0u8; 256];
    let mut n = 0;
    while n < first.len() {
        out[n] = first[n];
        n += 1;
    }
    let mut b = 0usize;
    while b < 256 {
        let mut listed = false;
        let mut i = 0;
        while i < first.len() {
            if first[i] as usize == b {
                listed = true;
            }
            i += 1;
        }
        if !listed {
            out[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    // Printable ASCII before control bytes and UTF-8 lead bytes.
    let mut sorted = [0u8; 256];
    let mut k = 0;
    let mut pass = 0;
    while pass < 2 {
        let mut i = 0;
        while i < 256 {
            let v = out[i];
            let printable = i < first.len() || (v >= 0x20 && v < 0x7f);
            if printable == (pass == 0) {
                sorted[k] = v;
                k += 1;
            }
            i += 1;
        }
        pass += 1;
    }
    sorted
};

/// Which arrays of the document must hold distinct items: a trie over
/// instance paths, node 0 the document's own value.
#[derive(Debug, Default)]
pub struct UniqueItems {
    nodes: Vec<PathNode>,
    /// Per first byte, the tokens spelled starting with it (made on first
    /// use, per vocabulary).
    by_first_byte: OnceLock<Tables>,
}

/// Tokens by what they hold, for the tokens worth trying.
#[derive(Debug, Default)]
struct Tables {
    first: Vec<Vec<TokenId>>,
    /// Tokens with a `"` anywhere (one may close a string item).
    quoted: Vec<TokenId>,
    /// Tokens with a `,` anywhere (one may hold two items).
    commas: Vec<TokenId>,
    /// Tokens with a `"` and then a `,` (inside a string, one may hold
    /// two items).
    quoted_commas: Vec<TokenId>,
}

#[derive(Debug, Default, Clone)]
struct PathNode {
    keys: HashMap<String, u32>,
    /// The keys an object schema here does not declare (its
    /// `additionalProperties`): the declared names, and the node.
    others: Vec<(Vec<String>, u32)>,
    items: Option<u32>,
    unique: bool,
    /// The largest `minItems` of the checked arrays here.
    min_items: u64,
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
    pub fn mark(&mut self, at: u32, min_items: u64) {
        let n = &mut self.nodes[at as usize];
        n.unique = true;
        n.min_items = n.min_items.max(min_items);
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

    fn child_key(&self, at: &[u32], key: &[u8]) -> Vec<u32> {
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

    fn child_items(&self, at: &[u32]) -> Vec<u32> {
        at.iter()
            .filter_map(|&n| self.nodes[n as usize].items)
            .collect()
    }

    fn unique_at(&self, at: &[u32]) -> Option<u64> {
        at.iter()
            .filter(|&&n| self.nodes[n as usize].unique)
            .map(|&n| self.nodes[n as usize].min_items)
            .max()
    }

    fn tables(&self, vocab: &Vocabulary) -> &Tables {
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

/// The items of one open checked array.
#[derive(Clone, Debug)]
struct Checked {
    /// Index of the array's frame in the scanner's stack.
    frame: usize,
    seen: Arc<HashSet<Box<[u8]>>>,
    /// The item being written (raw bytes), while `in_item`.
    item: Vec<u8>,
    in_item: bool,
    count: u64,
    min_items: u64,
}

#[derive(Clone, Debug)]
enum Frame {
    Obj { node: Vec<u32> },
    Arr { node: Vec<u32> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lex {
    Value,
    AfterValue,
    Key,
    Colon,
    Str { key: bool, esc: u8 },
    Num,
    Lit,
    End,
}

/// A byte of the output completed an item equal to an earlier one.
#[derive(Debug)]
struct Duplicate;

/// Where a matcher's output stands for the check: a JSON scanner over the
/// bytes so far with the items of every open checked array.
#[derive(Clone, Debug)]
pub(crate) struct Scan {
    stack: Vec<Frame>,
    lex: Lex,
    checked: Vec<Checked>,
    /// The nodes of the value about to start (where `lex` is `Value`).
    next_node: Vec<u32>,
    /// Object keys being read.
    key: Vec<u8>,
}

impl Scan {
    pub(crate) fn new() -> Scan {
        Scan {
            stack: Vec::new(),
            lex: Lex::Value,
            checked: Vec::new(),
            next_node: vec![0],
            key: Vec::new(),
        }
    }

    fn append(&mut self, b: u8) {
        for c in self.checked.iter_mut().filter(|c| c.in_item) {
            c.item.push(b);
        }
    }

    /// A value starts: an item of the innermost checked array when that
    /// array is the top frame.
    fn begin_value(&mut self) {
        let depth = self.stack.len();
        if let Some(c) = self.checked.last_mut() {
            if c.frame + 1 == depth && !c.in_item {
                c.in_item = true;
                c.item.clear();
            }
        }
    }

    /// A value ended; the top frame is its parent.
    fn value_done(&mut self) -> Result<(), Duplicate> {
        self.lex = if self.stack.is_empty() {
            Lex::End
        } else {
            Lex::AfterValue
        };
        let depth = self.stack.len();
        if let Some(c) = self.checked.last_mut() {
            if c.frame + 1 == depth && c.in_item {
                c.in_item = false;
                let canon = canonical(&c.item).into_boxed_slice();
                if c.seen.contains(&canon) {
                    return Err(Duplicate);
                }
                Arc::make_mut(&mut c.seen).insert(canon);
                c.count += 1;
            }
        }
        Ok(())
    }

    fn feed(&mut self, spec: &UniqueItems, b: u8) -> Result<(), Duplicate> {
        loop {
            match self.lex {
                Lex::Num | Lex::Lit => {
                    let more = if self.lex == Lex::Num {
                        matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                    } else {
                        b.is_ascii_lowercase()
                    };
                    if more {
                        self.append(b);
                        return Ok(());
                    }
                    self.value_done()?;
                    continue;
                }
                Lex::Str { key, esc } => {
                    self.append(b);
                    if key {
                        self.key.push(b);
                    }
                    self.lex = match (esc, b) {
                        (0, b'\\') => Lex::Str { key, esc: 1 },
                        (0, b'"') => {
                            if key {
                                Lex::Colon
                            } else {
                                return self.value_done();
                            }
                        }
                        (0, _) => Lex::Str { key, esc: 0 },
                        (1, b'u') => Lex::Str { key, esc: 2 },
                        (1, _) => Lex::Str { key, esc: 0 },
                        (2..=4, _) => Lex::Str { key, esc: esc + 1 },
                        _ => Lex::Str { key, esc: 0 },
                    };
                    return Ok(());
                }
                _ if matches!(b, b' ' | b'\t' | b'\n' | b'\r') => return Ok(()),
                Lex::Value => {
                    if b == b']' {
                        return self.close(b);
                    }
                    let node = std::mem::take(&mut self.next_node);
                    self.begin_value();
                    self.append(b);
                    match b {
                        b'{' => {
                            self.stack.push(Frame::Obj { node });
                            self.lex = Lex::Key;
                        }
                        b'[' => {
                            let unique = spec.unique_at(&node);
                            self.next_node = spec.child_items(&node);
                            self.stack.push(Frame::Arr { node });
                            if let Some(min_items) = unique {
                                self.checked.push(Checked {
                                    frame: self.stack.len() - 1,
                                    seen: Arc::new(HashSet::new()),
                                    item: Vec::new(),
                                    in_item: false,
                                    count: 0,
                                    min_items,
                                });
                            }
                        }
                        b'"' => self.lex = Lex::Str { key: false, esc: 0 },
                        b'-' | b'0'..=b'9' => self.lex = Lex::Num,
                        _ => self.lex = Lex::Lit,
                    }
                    return Ok(());
                }
                Lex::Key => {
                    match b {
                        b'}' => return self.close(b),
                        b'"' => {
                            self.key.clear();
                            self.key.push(b);
                            self.lex = Lex::Str { key: true, esc: 0 };
                        }
                        _ => {}
                    }
                    self.append(b);
                    return Ok(());
                }
                Lex::Colon => {
                    self.append(b);
                    if b == b':' {
                        self.next_node = match self.stack.last() {
                            Some(Frame::Obj { node }) => spec.child_key(node, &self.key),
                            _ => Vec::new(),
                        };
                        self.lex = Lex::Value;
                    }
                    return Ok(());
                }
                Lex::AfterValue => match b {
                    b',' => {
                        self.append(b);
                        match self.stack.last() {
                            Some(Frame::Obj { .. }) => self.lex = Lex::Key,
                            Some(Frame::Arr { node }) => {
                                self.next_node = spec.child_items(node);
                                self.lex = Lex::Value;
                            }
                            None => self.lex = Lex::End,
                        }
                        return Ok(());
                    }
                    b']' | b'}' => return self.close(b),
                    _ => return Ok(()),
                },
                Lex::End => return Ok(()),
            }
        }
    }

    /// `]` or `}`: the top frame closes, and is a value of its parent.
    fn close(&mut self, b: u8) -> Result<(), Duplicate> {
        if self
            .checked
            .last()
            .is_some_and(|c| c.frame + 1 == self.stack.len())
        {
            self.checked.pop();
        }
        self.append(b);
        self.stack.pop();
        self.value_done()
    }

    /// The innermost open checked array, when the output is at its level
    /// (between its items or in one) and it holds an item already.
    fn active(&self) -> Option<&Checked> {
        let c = self.checked.last()?;
        (!c.seen.is_empty()).then_some(c)
    }

    /// Inside a string item of the innermost checked array: the item's text
    /// so far in canonical spelling (without the closing quote), or `None`
    /// in the middle of an escape.
    fn string_prefix(&self) -> Option<Option<Vec<u8>>> {
        let c = self.checked.last()?;
        if !c.in_item || c.frame + 1 != self.stack.len() {
            return None;
        }
        let Lex::Str { key: false, esc } = self.lex else {
            return None;
        };
        if esc != 0 {
            return Some(None);
        }
        let mut closed = c.item.clone();
        closed.push(b'"');
        let s: String = serde_json::from_slice(&closed).ok()?;
        let mut canon = serde_json::to_vec(&s).ok()?;
        canon.pop();
        Some(Some(canon))
    }

    /// Whether an unfinished item could still turn out equal to one
    /// already written (so the search for a new completion must run).
    fn item_at_risk(&self) -> bool {
        let Some(c) = self.active() else {
            return false;
        };
        if !c.in_item {
            // After a comma an item must follow, and a finite item
            // language may have none left.
            return self.lex == Lex::Value && c.frame + 1 == self.stack.len();
        }
        match self.string_prefix() {
            Some(Some(p)) => c.seen.iter().any(|u| u.starts_with(&p)),
            _ => true,
        }
    }

    /// Items written in open checked arrays (to see an item complete).
    fn items_done(&self) -> u64 {
        self.checked.iter().map(|c| c.count).sum()
    }

    /// Tokens a budget may need beyond the index's bound here.
    pub(crate) fn slack(&self) -> u32 {
        self.checked
            .iter()
            .map(|c| 2 * (c.min_items.saturating_sub(c.count).min(1 << 20) as u32 + 1))
            .sum()
    }
}

/// The check as one matcher runs it.
#[derive(Clone, Debug)]
pub(crate) struct UniqueRun {
    spec: Arc<UniqueItems>,
    /// `scans[i]` goes with the matcher's `states[i]`.
    pub(crate) scans: Vec<Scan>,
    /// The mask of the current state, where the check narrows it.
    filtered: OnceLock<Option<TokenSet>>,
}

impl UniqueRun {
    pub(crate) fn new(spec: Arc<UniqueItems>) -> UniqueRun {
        UniqueRun {
            spec,
            scans: vec![Scan::new()],
            filtered: OnceLock::new(),
        }
    }

    pub(crate) fn spec(&self) -> &Arc<UniqueItems> {
        &self.spec
    }

    fn scan(&self) -> &Scan {
        self.scans.last().expect("one scan per state")
    }

    /// Forgets the mask made for the current state.
    pub(crate) fn moved(&mut self) {
        self.filtered = OnceLock::new();
    }

    /// The scan after `bytes` from the current one; `None` when they
    /// complete a duplicate item.
    pub(crate) fn after(&self, scan: &Scan, bytes: &[u8]) -> Option<Scan> {
        let mut s = scan.clone();
        for &b in bytes {
            s.feed(&self.spec, b).ok()?;
        }
        Some(s)
    }

    pub(crate) fn push(&mut self, s: Scan) {
        self.scans.push(s);
        self.moved();
    }

    pub(crate) fn current(&self) -> &Scan {
        self.scan()
    }

    /// The allowed set narrowed by the check, where it narrows anything
    /// (`base` is the index's set for `s`).
    pub(crate) fn filtered(
        &self,
        index: &TokenIndex,
        s: StateId,
        base: &TokenSet,
    ) -> Option<&TokenSet> {
        self.filtered
            .get_or_init(|| self.narrow(index, s, base, self.scan()))
            .as_ref()
    }

    fn narrow(
        &self,
        index: &TokenIndex,
        s: StateId,
        base: &TokenSet,
        scan: &Scan,
    ) -> Option<TokenSet> {
        let vocab = index.vocab();
        let mut out: Option<TokenSet> = None;
        let try_token = |t: TokenId, out: &mut Option<TokenSet>| {
            if !self.token_ok(index, s, scan, t) {
                out.get_or_insert_with(|| base.clone()).remove(t);
            }
        };
        if scan.active().is_none() {
            // No item yet: only a token holding two items can repeat one.
            scan.checked.last()?;
            let tables = self.spec.tables(vocab);
            let list = match scan.lex {
                Lex::Str { .. } => &tables.quoted_commas,
                _ => &tables.commas,
            };
            for &t in list {
                if base.contains(t) {
                    try_token(t, &mut out);
                }
            }
            return out;
        }
        match scan.string_prefix() {
            Some(Some(p)) => {
                let c = scan.active()?;
                let mut first = [false; 256];
                first[b'\\' as usize] = true;
                let mut any = false;
                for u in c.seen.iter().filter(|u| u.starts_with(&p)) {
                    any = true;
                    match u.get(p.len()) {
                        Some(&b) => first[b as usize] = true,
                        None => first[b'"' as usize] = true,
                    }
                }
                if !any {
                    return None;
                }
                let tables = self.spec.tables(vocab);
                let mut tried = HashSet::new();
                for (b, list) in tables.first.iter().enumerate() {
                    if first[b] {
                        for &t in list {
                            if base.contains(t) && tried.insert(t) {
                                try_token(t, &mut out);
                            }
                        }
                    }
                }
                for &t in &tables.quoted {
                    if base.contains(t) && tried.insert(t) {
                        try_token(t, &mut out);
                    }
                }
            }
            _ => {
                for t in base.iter() {
                    if !vocab.is_eos(t) {
                        try_token(t, &mut out);
                    }
                }
            }
        }
        out
    }

    /// Whether token `t` (allowed by the index at `s`) passes the check
    /// from `scan`.
    pub(crate) fn token_ok(&self, index: &TokenIndex, s: StateId, scan: &Scan, t: TokenId) -> bool {
        let Some(bytes) = index.vocab().spelling(t) else {
            return true;
        };
        self.bytes_ok(index, s, scan, bytes)
    }

    /// Whether `bytes` from `s` complete no duplicate and leave no item
    /// that only duplicates can finish.
    pub(crate) fn bytes_ok(
        &self,
        index: &TokenIndex,
        s: StateId,
        scan: &Scan,
        bytes: &[u8],
    ) -> bool {
        let mut sc = scan.clone();
        for &b in bytes {
            if sc.feed(&self.spec, b).is_err() {
                return false;
            }
        }
        if !sc.item_at_risk() {
            return true;
        }
        let mut st = s;
        for &b in bytes {
            match index.next_byte_state(st, b) {
                Some(n) => st = n,
                None => return true,
            }
        }
        let mut budget = LOOKAHEAD_NODES;
        let done = sc.items_done();
        self.completes(index, st, &sc, done, &mut budget, 0)
    }

    /// Whether some continuation from `s` finishes the open item with a
    /// value not written before (a depth-first search of at most `budget`
    /// byte steps, the bytes that end an item tried first so that it
    /// finishes early).
    fn completes(
        &self,
        index: &TokenIndex,
        s: StateId,
        scan: &Scan,
        done: u64,
        budget: &mut usize,
        depth: usize,
    ) -> bool {
        if depth > 256 {
            return false;
        }
        // The state after each byte class, looked up once per class.
        let class_of = index.byte_class_of();
        let mut after: [Option<Option<StateId>>; 256] = [None; 256];
        for &b in BYTE_ORDER.iter() {
            let c = class_of[b as usize] as usize;
            let n = *after[c].get_or_insert_with(|| index.next_byte_state(s, b));
            let Some(n) = n else {
                continue;
            };
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            let mut sc = scan.clone();
            if sc.feed(&self.spec, b).is_err() {
                continue;
            }
            if sc.items_done() > done || sc.checked.len() < scan.checked.len() {
                return true;
            }
            if self.completes(index, n, &sc, done, budget, depth + 1) {
                return true;
            }
        }
        false
    }
}

/// The canonical form of a JSON value's text: equal values, equal forms.
pub(crate) fn canonical(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 2);
    let mut p = Canon { s: raw, i: 0 };
    if p.value(&mut out).is_none() {
        out.clear();
        out.push(b'!');
        out.extend_from_slice(raw);
    }
    out
}

struct Canon<'a> {
    s: &'a [u8],
    i: usize,
}

impl Canon<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn value(&mut self, out: &mut Vec<u8>) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                out.extend_from_slice(&serde_json::to_vec(&s).ok()?);
            }
            b'{' => {
                self.i += 1;
                let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let k = serde_json::to_vec(&self.string()?).ok()?;
                        self.ws();
                        (self.peek()? == b':').then_some(())?;
                        self.i += 1;
                        let mut v = Vec::new();
                        self.value(&mut v)?;
                        // A repeated key: the last one counts.
                        members.retain(|(m, _)| *m != k);
                        members.push((k, v));
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b'}' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                members.sort();
                out.push(b'{');
                for (j, (k, v)) in members.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(k);
                    out.push(b':');
                    out.extend_from_slice(v);
                }
                out.push(b'}');
            }
            b'[' => {
                self.i += 1;
                out.push(b'[');
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                } else {
                    let mut first = true;
                    loop {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        self.value(out)?;
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b']' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                out.push(b']');
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|b| matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                {
                    self.i += 1;
                }
                out.extend_from_slice(&canonical_number(&self.s[start..self.i])?);
            }
            _ => {
                let start = self.i;
                while self.peek().is_some_and(|b| b.is_ascii_lowercase()) {
                    self.i += 1;
                }
                out.extend_from_slice(&self.s[start..self.i]);
            }
        }
        Some(())
    }

    fn string(&mut self) -> Option<String> {
        let start = self.i;
        (self.peek()? == b'"').then_some(())?;
        self.i += 1;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    break;
                }
                _ => self.i += 1,
            }
        }
        serde_json::from_slice(self.s.get(start..self.i)?).ok()
    }
}

/// A JSON number as an exact decimal: `[-]digits e exponent`, no leading
/// or trailing zeros in the digits (`0` for zero, either sign).
fn canonical_number(t: &[u8]) -> Option<Vec<u8>> {
    let (neg, t) = match t.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, t),
    };
    let (mant, exp) = match t.iter().position(|&b| b == b'e' || b == b'E') {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, &b""[..]),
    };
    let (int, frac) = match mant.iter().position(|&b| b == b'.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, &b""[..]),
    };
    let mut exp: i128 = if exp.is_empty() {
        0
    } else {
        let s = std::str::from_utf8(exp).ok()?;
        let s = s.strip_prefix('+').unwrap_or(s);
        // Exponents past any i64 are clamped: such numbers are not written
        // by a model within any budget this check serves.
        s.parse::<i128>().unwrap_or(if s.starts_with('-') {
            -(1 << 100)
        } else {
            1 << 100
        })
    };
    let mut digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    exp -= frac.len() as i128;
    let lead = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..lead);
    while digits.last() == Some(&b'0') {
        digits.pop();
        exp += 1;
    }
    if digits.is_empty() {
        return Some(b"0".to_vec());
    }
    let mut out = Vec::with_capacity(digits.len() + 8);
    if neg {
        out.push(b'-');
    }
    out.extend_from_slice(&digits);
    out.extend_from_slice(format!("e{exp}").as_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_have_equal_forms() {
        let same = [
            (&b"1"[..], &b"1.0"[..]),
            (b"1", b"10e-1"),
            (b"-0", b"0.000"),
            (b"120", b"1.2E2"),
            (b"\"a\"", b"\"\\u0061\""),
            (b"\"\\n\"", b"\"\\u000a\""),
            (
                b"{\"a\": 1, \"b\": [true, null]}",
                b"{\"b\":[true,null],\"a\":1.0}",
            ),
        ];
        for (a, b) in same {
            assert_eq!(
                canonical(a),
                canonical(b),
                "{:?} vs {:?}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
        let differ = [
            (&b"1"[..], &b"\"1\""[..]),
            (b"1", b"1.01"),
            (b"-1", b"1"),
            (b"[1,2]", b"[2,1]"),
            (b"\"a\"", b"\"A\""),
            (b"{\"a\":1}", b"{\"a\":1,\"b\":1}"),
        ];
        for (a, b) in differ {
            assert_ne!(
                canonical(a),
                canonical(b),
                "{:?} vs {:?}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
    }

    fn spec_tags() -> UniqueItems {
        let mut u = UniqueItems::new();
        let tags = u.key(0, "tags");
        u.mark(tags, 0);
        u
    }

    fn feed(spec: &UniqueItems, text: &str) -> Result<Scan, usize> {
        let mut s = Scan::new();
        for (i, &b) in text.as_bytes().iter().enumerate() {
            s.feed(spec, b).map_err(|_| i)?;
        }
        Ok(s)
    }

    #[test]
    fn the_scanner_finds_duplicates_where_the_trie_says() {
        let spec = spec_tags();
        assert!(feed(&spec, r#"{"tags": ["a", "b", "c"], "x": ["a", "a"]}"#).is_ok());
        // The byte that completes the second `"a"` is refused.
        let text = r#"{"tags": ["a", "b", "\u0061"]}"#;
        assert_eq!(feed(&spec, text).err(), text.rfind('"'));
        // Numbers complete at the byte after them.
        let text = r#"{"tags": [1, 2, 1.0]}"#;
        assert_eq!(feed(&spec, text).err(), Some(text.len() - 2));
        // A nested array under another key is not checked.
        assert!(feed(&spec, r#"{"y": {"tags": [1, 1]}, "tags": []}"#).is_ok());
    }

    #[test]
    fn string_prefixes_say_which_items_are_at_risk() {
        let spec = spec_tags();
        let s = feed(&spec, r#"{"tags": ["abc", "ab"#).unwrap();
        assert!(s.item_at_risk());
        let s = feed(&spec, r#"{"tags": ["abc", "ax"#).unwrap();
        assert!(!s.item_at_risk());
        let s = feed(&spec, r#"{"tags": ["abc", 12"#).unwrap();
        assert!(s.item_at_risk());
        let s = feed(&spec, r#"{"tags": ["abc"#).unwrap();
        assert!(!s.item_at_risk());
    }
}

//! The check as one matcher runs it: the narrowed mask and the search for
//! a new completion.

use super::places::UniqueItems;
use super::scan::{Lex, Scan};
use crate::index::{StateId, TokenIndex};
use crate::vocab::trie::NONE;
use crate::vocab::{TokenId, TokenSet};
use std::collections::HashMap;

/// Results of the search, per index state and scan ([`Scan::memo_key`]),
/// shared by the tokens tried for one mask.
type Memo = HashMap<(StateId, (u64, bool, Vec<u8>)), bool>;

/// One search for a new completion of an item.
struct Search<'a> {
    index: &'a TokenIndex,
    /// Items written when it started (one more: an item ended new).
    done: u64,
    /// Byte steps left.
    budget: usize,
    memo: &'a mut Memo,
}
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
            scans: vec![Scan::new(&spec)],
            spec,
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
        let memo = std::cell::RefCell::new(Memo::new());
        let try_token = |t: TokenId, out: &mut Option<TokenSet>| {
            let bytes = vocab.spelling(t).unwrap_or(&[]);
            if !self.bytes_ok_memo(index, s, scan, bytes, &mut memo.borrow_mut()) {
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
            // Inside a string item, the token must close it and hold the
            // whole of another, equal one: three quotes at least.
            let string_item = scan.string_prefix().is_some();
            let holds_two = |bytes: &[u8]| {
                scan.may_end_item(bytes)
                    && (!string_item || bytes.iter().filter(|&&b| b == b'"').count() >= 3)
            };
            for &t in list {
                if base.contains(t) && holds_two(vocab.spelling(t).unwrap_or(&[])) {
                    try_token(t, &mut out);
                }
            }
            return out;
        }
        let tables = self.spec.tables(vocab);
        // The tokens starting with a marked byte (a backslash always: any
        // character may be spelled `\uXXXX`) that pass `keep`, then those
        // of `extra` not tried yet (the first-byte lists are disjoint).
        let try_first = |mut first: [bool; 256],
                         extra: &[TokenId],
                         keep: &dyn Fn(&[u8]) -> bool,
                         out: &mut Option<TokenSet>| {
            first[b'\\' as usize] = true;
            for (_, list) in tables.first.iter().enumerate().filter(|(b, _)| first[*b]) {
                for &t in list {
                    if base.contains(t) && keep(vocab.spelling(t).unwrap_or(&[])) {
                        try_token(t, out);
                    }
                }
            }
            for &t in extra {
                let bytes = vocab.spelling(t).unwrap_or(&[]);
                let tried = bytes.first().is_some_and(|&b| first[b as usize]) && keep(bytes);
                if !tried && keep(bytes) && base.contains(t) {
                    try_token(t, out);
                }
            }
        };
        let c = scan.active()?;
        let next = match scan.string_prefix() {
            // A string item: the bytes that go on as an earlier item does,
            // and any token that may close it.
            Some(Some(p)) => {
                let first = scan.next_bytes_of_earlier()?;
                if !first.iter().any(|&b| b) {
                    return None;
                }
                // The tokens that matter: those that spell a piece of the
                // rest of an earlier item starting with the text so far, or
                // such a piece and then a backslash (another spelling) or a
                // quote (the item ends there); found by walking the token
                // trie along each rest, not by trying every token that
                // starts with a byte it continues with. Then any token that
                // closes the string and goes on to a comma (another item
                // may start in it).
                let trie = &index.tries().full;
                let mut found: Vec<u32> = Vec::new();
                for rest in c.starting_with(&p).map(|u| &u[p.len()..]) {
                    let mut node = None;
                    for &b in rest {
                        for stop in [b'\\', b'"'] {
                            if let Some(x) = trie.child(node, stop) {
                                let end = trie.end[x] as usize;
                                found.extend(trie.token[x..end].iter().filter(|&&t| t != NONE));
                            }
                        }
                        match trie.child(node, b) {
                            Some(x) => {
                                node = Some(x);
                                if trie.token[x] != NONE {
                                    found.push(trie.token[x]);
                                }
                            }
                            None => break,
                        }
                    }
                }
                trie.with_dups(&mut found);
                for t in found.iter().map(|&t| TokenId(t)) {
                    if base.contains(t) {
                        try_token(t, &mut out);
                    }
                }
                for &t in &tables.quoted_commas {
                    if found.binary_search(&t.0).is_err() && base.contains(t) {
                        try_token(t, &mut out);
                    }
                }
                return out;
            }
            Some(None) => None,
            None if c.in_item => match scan.partial_next() {
                Some(n) => Some(n),
                // The item can no longer become an earlier one: only a
                // token holding another item can repeat one.
                None => {
                    let ends = |bytes: &[u8]| scan.may_end_item(bytes);
                    try_first([false; 256], &tables.commas, &ends, &mut out);
                    return out;
                }
            },
            None => None,
        };
        match next {
            // Inside a string of an item that may become an earlier one:
            // the tokens that spell the rest of such a string (up to their
            // first quote), or hold a backslash; a token that spells none
            // leaves the item apart from every earlier one, and only one
            // that also holds a comma may write another item.
            Some(n) if !n.anywhere => {
                let spells_a_rest = |bytes: &[u8]| {
                    let upto = match bytes.iter().position(|&b| b == b'"') {
                        Some(q) => &bytes[..=q],
                        None => bytes,
                    };
                    bytes.contains(&b'\\') || n.rests.iter().any(|r| r.starts_with(upto))
                };
                // A token that spells none leaves the item apart: it
                // matters only where it may also end the item and write
                // another.
                let matters = |bytes: &[u8]| spells_a_rest(bytes) || scan.may_end_item(bytes);
                let mut first = n.bytes;
                first[b'"' as usize] = true;
                try_first(first, &tables.quoted_commas, &matters, &mut out);
            }
            // In an escape, between items, or stopping outside a string in
            // an item that may still become an earlier one: every token.
            _ => {
                for t in base.iter().filter(|&t| !vocab.is_eos(t)) {
                    try_token(t, &mut out);
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
        self.bytes_ok_memo(index, s, scan, bytes, &mut Memo::new())
    }

    fn bytes_ok_memo(
        &self,
        index: &TokenIndex,
        s: StateId,
        scan: &Scan,
        bytes: &[u8],
        memo: &mut Memo,
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
        if let Some(known) = sc.listed_answer() {
            return known;
        }
        let mut st = s;
        for &b in bytes {
            match index.next_byte_state(st, b) {
                Some(n) => st = n,
                None => return true,
            }
        }
        let mut q = Search {
            index,
            done: sc.items_done(),
            budget: LOOKAHEAD_NODES,
            memo,
        };
        self.completes(&mut q, st, &sc, 0)
    }

    /// Whether some continuation from `s` finishes the open item with a
    /// value not written before (a depth-first search of at most `budget`
    /// byte steps, the bytes that end an item tried first so that it
    /// finishes early).
    fn completes(&self, q: &mut Search, s: StateId, scan: &Scan, depth: usize) -> bool {
        if depth > 256 {
            return false;
        }
        let key = (s, scan.memo_key());
        if let Some(&known) = q.memo.get(&key) {
            return known;
        }
        let found = self.completes_from(q, s, scan, depth);
        // A search cut short by the budget proves nothing.
        if found || q.budget > 0 {
            q.memo.insert(key, found);
        }
        found
    }

    /// [`Self::completes`] for a state not searched before.
    fn completes_from(&self, q: &mut Search, s: StateId, scan: &Scan, depth: usize) -> bool {
        let index = q.index;
        // The state after each byte class, looked up once per class. Every
        // child is looked at before any is searched below: one that ends
        // the item new or leaves every earlier item behind settles it.
        let class_of = index.byte_class_of();
        let mut after: [Option<Option<StateId>>; 256] = [None; 256];
        // Inside a string (the item itself, or a key or value inside an
        // object or array item): the bytes that continue some earlier item
        // (printable ASCII but `"` and `\\` is spelled as itself). Found once
        // here rather than by matching each child's text again.
        let next = scan.next_bytes_of_earlier().or_else(|| {
            let c = scan.checked.last()?;
            if !c.in_item || scan.string_prefix().is_some() {
                return None;
            }
            scan.partial_next().filter(|n| !n.anywhere).map(|n| n.bytes)
        });
        let mut deeper = Vec::new();
        for &b in BYTE_ORDER.iter() {
            let c = class_of[b as usize] as usize;
            let n = *after[c].get_or_insert_with(|| index.next_byte_state(s, b));
            let Some(n) = n else {
                continue;
            };
            if q.budget == 0 {
                return false;
            }
            q.budget -= 1;
            if let Some(next) = &next {
                if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' && !next[b as usize] {
                    return true;
                }
            }
            let mut sc = scan.clone();
            if sc.feed(&self.spec, b).is_err() {
                continue;
            }
            // The item ended new, or its text no longer starts any earlier
            // item (then every way to finish it is new, and the state is
            // live, so there is one).
            if sc.items_done() > q.done
                || sc.checked.len() < scan.checked.len()
                || !sc.item_at_risk()
            {
                return true;
            }
            deeper.push((n, sc));
        }
        for (n, sc) in deeper {
            if self.completes(q, n, &sc, depth + 1) {
                return true;
            }
        }
        false
    }
}

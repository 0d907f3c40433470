//! The JSON scanner each matcher runs over its output, with the items of
//! every open checked array.

use super::canon::canonical;
use super::partial::{may_become, Next};
use super::places::UniqueItems;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The items of one open checked array.
#[derive(Clone, Debug)]
pub(super) struct Checked {
    /// Index of the array's frame in the scanner's stack.
    pub(super) frame: usize,
    pub(super) seen: Arc<BTreeSet<Box<[u8]>>>,
    /// The items written that are objects or arrays, parsed (for
    /// [`may_become`]), and their text as written.
    pub(super) containers: Arc<Vec<serde_json::Value>>,
    pub(super) written: Arc<Vec<Box<[u8]>>>,
    /// The item being written (raw bytes), while `in_item`.
    pub(super) item: Vec<u8>,
    pub(super) in_item: bool,
    pub(super) count: u64,
    pub(super) min_items: u64,
    /// The values the items may take, where the schema lists them.
    pub(super) listed: Option<Arc<Vec<Box<[u8]>>>>,
    /// The item being written can no longer equal an earlier one, whatever
    /// follows: found once (by [`Scan::item_at_risk`] or
    /// [`Scan::partial_next`]) and kept while the item grows, so a long
    /// item is not matched against the earlier ones at every byte.
    pub(super) apart: Flag,
}

/// A flag a shared scan may set (matchers are `Sync`): an atomic that
/// clones by value.
#[derive(Debug, Default)]
pub(super) struct Flag(std::sync::atomic::AtomicBool);

impl Flag {
    pub(super) fn get(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn set(&self, v: bool) {
        self.0.store(v, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Clone for Flag {
    fn clone(&self) -> Flag {
        Flag(std::sync::atomic::AtomicBool::new(self.get()))
    }
}

impl Checked {
    /// The items written that start with `p` (canonical forms).
    pub(super) fn starting_with<'a>(&'a self, p: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.seen
            .range::<[u8], _>((std::ops::Bound::Included(p), std::ops::Bound::Unbounded))
            .map(|u| &**u)
            .take_while(move |u| u.starts_with(p))
    }
}

#[derive(Clone, Debug)]
pub(super) enum Frame {
    Obj { node: Vec<u32> },
    Arr { node: Vec<u32> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lex {
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
pub(super) struct Duplicate;

/// Where a matcher's output stands for the check: a JSON scanner over the
/// bytes so far with the items of every open checked array.
#[derive(Clone, Debug)]
pub(crate) struct Scan {
    pub(super) stack: Vec<Frame>,
    pub(super) lex: Lex,
    pub(super) checked: Vec<Checked>,
    /// The nodes of the value about to start (where `lex` is `Value`).
    pub(super) next_node: Vec<u32>,
    /// Object keys being read.
    pub(super) key: Vec<u8>,
}

impl Scan {
    pub(crate) fn new(spec: &UniqueItems) -> Scan {
        Scan {
            stack: Vec::new(),
            lex: Lex::Value,
            checked: Vec::new(),
            next_node: spec.root(),
            key: Vec::new(),
        }
    }

    pub(super) fn append(&mut self, b: u8) {
        for c in self.checked.iter_mut().filter(|c| c.in_item) {
            c.item.push(b);
        }
    }

    /// A value starts: an item of the innermost checked array when that
    /// array is the top frame.
    pub(super) fn begin_value(&mut self) {
        let depth = self.stack.len();
        if let Some(c) = self.checked.last_mut() {
            if c.frame + 1 == depth && !c.in_item {
                c.in_item = true;
                c.item.clear();
                c.apart.set(false);
            }
        }
    }

    /// A value ended; the top frame is its parent.
    pub(super) fn value_done(&mut self) -> Result<(), Duplicate> {
        self.lex = if self.stack.is_empty() {
            Lex::End
        } else {
            Lex::AfterValue
        };
        let depth = self.stack.len();
        if let Some(c) = self.checked.last_mut() {
            if c.frame + 1 == depth && c.in_item {
                c.in_item = false;
                c.apart.set(false);
                let canon = canonical(&c.item).into_boxed_slice();
                if c.seen.contains(&canon) {
                    return Err(Duplicate);
                }
                if matches!(canon.first(), Some(b'{' | b'[')) {
                    if let Ok(v) = serde_json::from_slice(&canon) {
                        Arc::make_mut(&mut c.containers).push(v);
                        Arc::make_mut(&mut c.written).push(c.item.clone().into_boxed_slice());
                    }
                }
                Arc::make_mut(&mut c.seen).insert(canon);
                c.count += 1;
            }
        }
        Ok(())
    }

    pub(super) fn feed(&mut self, spec: &UniqueItems, b: u8) -> Result<(), Duplicate> {
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
                            if let Some((min_items, listed)) = unique {
                                self.checked.push(Checked {
                                    frame: self.stack.len() - 1,
                                    seen: Arc::new(BTreeSet::new()),
                                    containers: Arc::new(Vec::new()),
                                    written: Arc::new(Vec::new()),
                                    item: Vec::new(),
                                    in_item: false,
                                    count: 0,
                                    min_items,
                                    listed,
                                    apart: Default::default(),
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
    pub(super) fn close(&mut self, b: u8) -> Result<(), Duplicate> {
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
    pub(super) fn active(&self) -> Option<&Checked> {
        let c = self.checked.last()?;
        (!c.seen.is_empty()).then_some(c)
    }

    /// Inside a string item of the innermost checked array: the item's text
    /// so far in canonical spelling (without the closing quote), or `None`
    /// in the middle of an escape.
    pub(super) fn string_prefix(&self) -> Option<Option<Vec<u8>>> {
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

    /// Whether `bytes` may end the item being written of the innermost
    /// checked array (they close its open containers, and its string); a
    /// token that cannot write another item after it. `true` between items.
    pub(super) fn may_end_item(&self, bytes: &[u8]) -> bool {
        let Some(c) = self.checked.last() else {
            return true;
        };
        if !c.in_item {
            return true;
        }
        let open = self.stack.len().saturating_sub(c.frame + 1);
        let closers = bytes.iter().filter(|&&b| b == b'}' || b == b']').count();
        let in_string = matches!(self.lex, Lex::Str { .. });
        closers >= open && (!in_string || bytes.contains(&b'"'))
    }

    /// Whether an unfinished item could still turn out equal to one
    /// already written (so the search for a new completion must run).
    pub(super) fn item_at_risk(&self) -> bool {
        let Some(c) = self.active() else {
            return false;
        };
        if !c.in_item {
            // After a comma an item must follow, and a finite item
            // language may have none left.
            return self.lex == Lex::Value && c.frame + 1 == self.stack.len();
        }
        if c.apart.get() {
            return false;
        }
        // Text that starts no earlier item never will (an extension of it
        // starts none either), so the answer "apart" is kept.
        let risk = match self.string_prefix() {
            Some(Some(p)) => c.starting_with(&p).next().is_some(),
            Some(None) => return true,
            // A container item written as an earlier one was, so far: at
            // risk without matching it value by value.
            None if c.written.iter().any(|w| w.starts_with(&c.item)) => return true,
            None => self.partial_next().is_some(),
        };
        if !risk {
            c.apart.set(true);
        }
        risk
    }

    /// Inside an item that is not a plain string (an object, an array, a
    /// number, a literal): where its text so far could still become an
    /// earlier item, what may come next (`None`: it cannot).
    pub(super) fn partial_next(&self) -> Option<Next> {
        let c = self.checked.last()?;
        if c.apart.get() {
            return None;
        }
        let mut next = Next::new();
        let mut any = false;
        match c.item.first() {
            // An object or an array can only become one of those.
            Some(b'{' | b'[') => {
                for v in c.containers.iter() {
                    any |= may_become(&c.item, v, &mut next);
                }
            }
            _ => {
                for u in c
                    .seen
                    .iter()
                    .filter(|u| !matches!(u.first(), Some(b'{' | b'[')))
                {
                    let Ok(v) = serde_json::from_slice::<serde_json::Value>(u) else {
                        // Not JSON (cannot happen): assume the worst.
                        next.anywhere = true;
                        any = true;
                        continue;
                    };
                    any |= may_become(&c.item, &v, &mut next);
                }
            }
        }
        if !any {
            c.apart.set(true);
        }
        any.then_some(next)
    }

    /// Inside a string item, not in an escape: which bytes come next in
    /// the earlier items its text so far starts (canonical spellings; `"`
    /// where one ends there). All false: the item starts none.
    pub(super) fn next_bytes_of_earlier(&self) -> Option<[bool; 256]> {
        let Some(Some(p)) = self.string_prefix() else {
            return None;
        };
        let c = self.checked.last()?;
        let mut next = [false; 256];
        for u in c.starting_with(&p) {
            if let Some(&b) = u.get(p.len()) {
                next[b as usize] = true;
            }
        }
        Some(next)
    }

    /// Whether the open item (or the item a comma asks for) can still be
    /// finished new, answered from the listed values where the schema
    /// lists them (`None`: search).
    pub(super) fn listed_answer(&self) -> Option<bool> {
        let c = self.checked.last()?;
        let listed = c.listed.as_ref()?;
        let new = |v: &Box<[u8]>| !c.seen.contains(v);
        if !c.in_item {
            return (self.lex == Lex::Value && c.frame + 1 == self.stack.len())
                .then(|| listed.iter().any(new));
        }
        let Some(Some(p)) = self.string_prefix() else {
            return None;
        };
        let from = listed.partition_point(|v| **v < *p);
        Some(
            listed[from..]
                .iter()
                .take_while(|v| v.starts_with(&p))
                .any(new),
        )
    }

    /// What the search for a new completion remembers a scan by (with the
    /// index state): items written, and the open item's text.
    pub(super) fn memo_key(&self) -> (u64, bool, Vec<u8>) {
        let c = self.checked.last();
        (
            self.items_done(),
            self.lex == Lex::Value,
            c.map(|c| c.item.clone()).unwrap_or_default(),
        )
    }

    /// Items written in open checked arrays (to see an item complete).
    pub(super) fn items_done(&self) -> u64 {
        self.checked.iter().map(|c| c.count).sum()
    }

    /// Tokens a budget may need beyond the index's bound here: the
    /// shortest completion may repeat an item, so two per item still
    /// required that may have to differ from an earlier one (the first item
    /// of an array cannot repeat), and two for an item under way that no
    /// minimum asks for (from its comma on). It never grows along a
    /// completion but where an array with `minItems` ≥ 2 opens or an
    /// optional item starts.
    pub(crate) fn slack(&self) -> u32 {
        let depth = self.stack.len();
        self.checked
            .iter()
            .map(|c| {
                let rem = c.min_items.saturating_sub(c.count).min(1 << 20) as u32;
                let risky = if c.seen.is_empty() {
                    rem.saturating_sub(1)
                } else {
                    rem
                };
                // An item under way, or one a comma asks for.
                let pending = c.in_item || (self.lex == Lex::Value && c.frame + 1 == depth);
                let open = u32::from(pending && rem == 0 && !c.seen.is_empty());
                2 * (risky + open)
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_tags() -> UniqueItems {
        let mut u = UniqueItems::new();
        let tags = u.node();
        u.add_key(0, "tags", tags);
        u.mark(tags, 0, None);
        u.finish();
        u
    }

    fn feed(spec: &UniqueItems, text: &str) -> Result<Scan, usize> {
        let mut s = Scan::new(spec);
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
        // A number cannot become a string.
        let s = feed(&spec, r#"{"tags": ["abc", 12"#).unwrap();
        assert!(!s.item_at_risk());
        let s = feed(&spec, r#"{"tags": ["abc", 12, 1"#).unwrap();
        assert!(s.item_at_risk());
        let s = feed(&spec, r#"{"tags": [{"a": [1, "x"]}, {"a": [1.0, "#).unwrap();
        assert!(s.item_at_risk());
        let s = feed(&spec, r#"{"tags": [{"a": [1, "x"]}, {"a": [2"#).unwrap();
        // `2` may go on (`2.0`... is not 1, but a number's text is only
        // judged once it ends).
        assert!(s.item_at_risk());
        let s = feed(&spec, r#"{"tags": [{"a": [1, "x"]}, {"a": [2,"#).unwrap();
        assert!(!s.item_at_risk());
        let s = feed(&spec, r#"{"tags": ["abc"#).unwrap();
        assert!(!s.item_at_risk());
    }
}

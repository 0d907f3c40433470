//! # A direct parser for the regex subset the schema compiler writes
//!
//! A big schema compiles to a regex of several megabytes, and regex-syntax
//! parses it in two passes (an AST with spans, then its translation to
//! [`Hir`]) at about 200 ns a byte: over half of such a schema's time to
//! first mask (measured with `examples/dfa_phases.rs`; see
//! `docs/performance.md`). The schema
//! compiler only writes a small subset of the syntax: literals and escapes,
//! non-capturing groups, alternations, greedy repetitions and bracketed
//! classes of single characters and ranges. This parser reads that subset
//! straight into an [`Hir`], building it with the same smart constructors
//! the translator calls in the same order, so the result is *equal* to
//! regex-syntax's (tested on every MaskBench schema and by property tests).
//!
//! The parser is generic over what it builds ([`Sink`]): the [`Hir`] (for
//! front ends that need a syntax tree, and the equality tests), or the
//! compact tree that [`super::direct`] compiles to an NFA with no `Hir` at
//! all, which is what [`super::ByteDfa::build`] uses.
//!
//! Anything else (flags, capture groups, `.`, anchors, Perl or Unicode
//! classes, nested or set-operation classes, unusual repetitions, deep
//! nesting, and every syntax error) makes [`parse`] return `None`, and the
//! caller parses with regex-syntax, which gives the same answer or its own
//! error message. This parser never accepts a text regex-syntax rejects.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Deepest group nesting parsed here (deeper patterns go to regex-syntax,
/// which applies the configured nest limit).
pub(super) const MAX_DEPTH: u32 = 200;

/// The [`Hir`] of `pattern` (Unicode mode, no flags), equal to
/// regex-syntax's, or `None` when the pattern is outside the subset.
pub(super) fn parse(pattern: &str) -> Option<Hir> {
    parse_into(pattern, &mut HirSink)
}

/// Reads `pattern` into `sink`'s nodes; `None` outside the subset.
pub(super) fn parse_into<S: Sink>(pattern: &str, sink: &mut S) -> Option<S::Node> {
    let groups = sink.share_groups().then(|| Groups::new(pattern.as_bytes()));
    let mut p = Parser {
        s: pattern.as_bytes(),
        pos: 0,
        depth: 0,
        sink,
        groups,
        deepest: 0,
    };
    let node = p.alternation()?;
    (p.pos == p.s.len()).then_some(node)
}

/// What the parser builds its result with: the [`Hir`] (for regex-syntax's
/// NFA compiler and the equality tests) or the compact tree
/// [`parse_nfa`] compiles to an NFA itself.
pub(super) trait Sink {
    type Node: Clone;
    fn literal(&mut self, bytes: Box<[u8]>) -> Self::Node;
    fn class(&mut self, cls: ClassUnicode) -> Self::Node;
    fn concat(&mut self, items: Vec<Self::Node>) -> Self::Node;
    fn alternation(&mut self, branches: Vec<Self::Node>) -> Self::Node;
    fn repetition(
        &mut self,
        min: u32,
        max: Option<u32>,
        greedy: bool,
        sub: Self::Node,
    ) -> Self::Node;
    fn empty(&mut self) -> Self::Node;
    fn is_empty(&self, n: &Self::Node) -> bool;
    /// The non-empty ordered subsequences of `items` joined by `sep`
    /// (the schema compiler's `(?&SEP|K1|...|Kn)`, [`super::ordered`]);
    /// `None` where the sink does not take it (the text is then outside
    /// the subset).
    fn ordered(&mut self, _sep: Self::Node, _items: Vec<Self::Node>) -> Option<Self::Node> {
        None
    }
    /// One or more `item`s joined by `sep` (the schema compiler's
    /// `(?*SEP|ITEM)`, [`super::ordered`]); `None` where the sink does
    /// not take it.
    fn list(&mut self, _sep: Self::Node, _item: Self::Node) -> Option<Self::Node> {
        None
    }
    /// A member set (the schema compiler's `(?%FLAGS|SEP|K1|...|Kn)`,
    /// [`super::regs`]): `required` per declared item, `extra` when the
    /// last item is the extra member; `None` where the sink does not take
    /// it.
    fn member_set(
        &mut self,
        _flags: super::ordered::SetFlags,
        _sep: Self::Node,
        _items: Vec<Self::Node>,
    ) -> Option<Self::Node> {
        None
    }
    /// The bytes of a group of byte escapes `(?-u:\xHH...)` as they are
    /// (the pushdown engine's call markers); `None` where the sink does not
    /// take it.
    fn raw_bytes(&mut self, _bytes: Box<[u8]>) -> Option<Self::Node> {
        None
    }
    /// Whether a group whose text equals an earlier group's may be given
    /// that group's node (the parser then reads it once: the result is a
    /// DAG). [`Sink::reused`] hears of every such node.
    fn share_groups(&self) -> bool {
        false
    }
    /// `n`, built for an earlier group, stands for a later group of the
    /// same text too.
    fn reused(&mut self, _n: &Self::Node) {}
}

/// Groups shorter than this are read each time (their text is cheaper to
/// parse than to look up).
pub(super) const SHARED_GROUP_MIN: usize = 48;

/// The groups of a pattern read so far, by text, for [`Sink::share_groups`]:
/// a schema's regex repeats whole subpatterns (the "any JSON value" of
/// every free-form property, a `$ref`'d definition at each use), and each
/// is read once.
struct Groups<N> {
    /// Per `(`, in order, the position just past the `)` that closes it,
    /// as a scan that knows escapes and classes finds it (a candidate: a
    /// group is shared only when its text equals, byte for byte, the text
    /// an earlier group was actually read from).
    spans: Vec<(u32, u32)>,
    /// The first entry of `spans` not before the parser.
    cursor: usize,
    /// Groups read, by their text's hash.
    read: HashMap<u64, Vec<Read<N>>, foldhash::fast::FixedState>,
}

/// A group read, for [`Groups`].
struct Read<N> {
    /// Where its text starts, and its length.
    at: u32,
    len: u32,
    /// How many levels of groups it nests, itself included.
    levels: u32,
    node: N,
}

impl<N: Clone> Groups<N> {
    fn new(s: &[u8]) -> Groups<N> {
        let mut spans: Vec<(u32, u32)> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < s.len() {
            match s[i] {
                b'\\' => i += 1,
                b'[' => {
                    // To the class's `]` (a leading `]` or `^]` is literal;
                    // nested classes counted).
                    i += 1;
                    if s.get(i) == Some(&b'^') {
                        i += 1;
                    }
                    if s.get(i) == Some(&b']') {
                        i += 1;
                    }
                    let mut nest = 1;
                    while i < s.len() {
                        match s[i] {
                            b'\\' => i += 1,
                            b'[' => nest += 1,
                            b']' => {
                                nest -= 1;
                                if nest == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                }
                b'(' => {
                    open.push(spans.len());
                    spans.push((i as u32, u32::MAX));
                }
                b')' => {
                    if let Some(k) = open.pop() {
                        spans[k].1 = i as u32 + 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        spans.retain(|&(a, b)| b != u32::MAX && (b - a) as usize >= SHARED_GROUP_MIN);
        Groups {
            spans,
            cursor: 0,
            read: HashMap::default(),
        }
    }

    /// The candidate text of the group opening at `pos`, if long enough.
    fn span(&mut self, pos: usize) -> Option<(u32, u32)> {
        while self
            .spans
            .get(self.cursor)
            .is_some_and(|x| (x.0 as usize) < pos)
        {
            self.cursor += 1;
        }
        self.spans
            .get(self.cursor)
            .filter(|x| x.0 as usize == pos)
            .copied()
    }

    fn hash(s: &[u8]) -> u64 {
        foldhash::fast::FixedState::default().hash_one(s)
    }
}

/// The [`Hir`], built with the smart constructors in the translator's order.
struct HirSink;

impl Sink for HirSink {
    type Node = Hir;
    fn literal(&mut self, bytes: Box<[u8]>) -> Hir {
        Hir::literal(bytes)
    }
    fn class(&mut self, cls: ClassUnicode) -> Hir {
        Hir::class(Class::Unicode(cls))
    }
    fn concat(&mut self, items: Vec<Hir>) -> Hir {
        Hir::concat(items)
    }
    fn alternation(&mut self, branches: Vec<Hir>) -> Hir {
        Hir::alternation(branches)
    }
    fn repetition(&mut self, min: u32, max: Option<u32>, greedy: bool, sub: Hir) -> Hir {
        Hir::repetition(Repetition {
            min,
            max,
            greedy,
            sub: Box::new(sub),
        })
    }
    fn empty(&mut self) -> Hir {
        Hir::empty()
    }
    fn is_empty(&self, n: &Hir) -> bool {
        matches!(n.kind(), HirKind::Empty)
    }
}

struct Parser<'a, S: Sink> {
    s: &'a [u8],
    pos: usize,
    depth: u32,
    sink: &'a mut S,
    /// With [`Sink::share_groups`], the groups read so far.
    groups: Option<Groups<S::Node>>,
    /// The deepest nesting reached so far.
    deepest: u32,
}

/// One branch's items, literal characters gathered as the translator does.
struct Concat<N> {
    items: Vec<N>,
    lit: Vec<u8>,
    /// Where the last character starts in `lit`, when the last item read
    /// was a literal character.
    last_char: Option<usize>,
    /// Whether the last item read was an atom a repetition may apply to.
    last_atom: bool,
}

impl<N> Concat<N> {
    fn new() -> Concat<N> {
        Concat {
            items: Vec::new(),
            lit: Vec::new(),
            last_char: None,
            last_atom: false,
        }
    }

    fn flush(&mut self, sink: &mut impl Sink<Node = N>) {
        if !self.lit.is_empty() {
            let lit = std::mem::take(&mut self.lit).into_boxed_slice();
            self.items.push(sink.literal(lit));
        }
    }

    fn push_char(&mut self, c: char) {
        let start = self.lit.len();
        let mut buf = [0u8; 4];
        self.lit
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.last_char = Some(start);
        self.last_atom = true;
    }

    fn push(&mut self, h: N, sink: &mut impl Sink<Node = N>) {
        self.flush(sink);
        self.items.push(h);
        self.last_char = None;
        self.last_atom = true;
    }

    /// The last atom, taken out to be repeated.
    fn take_atom(&mut self, sink: &mut impl Sink<Node = N>) -> Option<N> {
        if !self.last_atom {
            return None;
        }
        self.last_atom = false;
        if let Some(start) = self.last_char.take() {
            let c = self.lit.split_off(start);
            self.flush(sink);
            return Some(sink.literal(c.into_boxed_slice()));
        }
        self.items.pop()
    }

    fn finish(mut self, sink: &mut impl Sink<Node = N>) -> N {
        self.flush(sink);
        let mut items: Vec<N> = self
            .items
            .into_iter()
            .filter(|h| !sink.is_empty(h))
            .collect();
        match items.len() {
            0 => sink.empty(),
            1 => items.pop().expect("one item"),
            _ => sink.concat(items),
        }
    }
}

impl<S: Sink> Parser<'_, S> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    /// Branches up to the end or to an unmatched `)` (not consumed).
    fn alternation(&mut self) -> Option<S::Node> {
        let mut branches = self.branches()?;
        if branches.len() == 1 {
            return branches.pop();
        }
        Some(self.sink.alternation(branches))
    }

    /// The branches of an alternation, each read to a `|`, an unmatched
    /// `)` (not consumed) or the end.
    fn branches(&mut self) -> Option<Vec<S::Node>> {
        let mut branches = Vec::new();
        let mut cur = Concat::new();
        loop {
            match self.peek() {
                None | Some(b')') => break,
                Some(b'|') => {
                    self.pos += 1;
                    let branch = std::mem::replace(&mut cur, Concat::new());
                    branches.push(branch.finish(self.sink));
                }
                Some(_) => self.item(&mut cur)?,
            }
        }
        branches.push(cur.finish(self.sink));
        Some(branches)
    }

    fn item(&mut self, cur: &mut Concat<S::Node>) -> Option<()> {
        let b = self.peek()?;
        match b {
            b'(' if self.s[self.pos..].starts_with(b"(?-u:") => {
                let h = self.raw_group()?;
                cur.push(h, self.sink);
            }
            b'(' => {
                let h = self.group()?;
                cur.push(h, self.sink);
            }
            b'[' => {
                self.pos += 1;
                let cls = self.class()?;
                let h = self.sink.class(cls);
                cur.push(h, self.sink);
            }
            b'\\' => {
                self.pos += 1;
                let c = self.escape()?;
                cur.push_char(c);
            }
            b'*' | b'+' | b'?' | b'{' => {
                let (min, max) = self.quantifier()?;
                let greedy = if self.peek() == Some(b'?') {
                    self.pos += 1;
                    false
                } else {
                    true
                };
                if matches!(self.peek(), Some(b'*' | b'+' | b'?' | b'{')) {
                    return None;
                }
                let sub = cur.take_atom(self.sink)?;
                let h = self.sink.repetition(min, max, greedy, sub);
                cur.push(h, self.sink);
                cur.last_atom = false;
            }
            b'.' | b'^' | b'$' | b')' | b'|' => return None,
            _ => {
                let c = self.char()?;
                cur.push_char(c);
            }
        }
        Some(())
    }

    /// A group `(?:...)`, `(?&...)` or `(?*...)` (at its `(`), or the node
    /// of an earlier group of the same text ([`Sink::share_groups`]).
    fn group(&mut self) -> Option<S::Node> {
        let start = self.pos;
        let mut key = None;
        if let Some(g) = &mut self.groups {
            if let Some((a, b)) = g.span(start) {
                let text = &self.s[a as usize..b as usize];
                let h = Groups::<S::Node>::hash(text);
                // Nested no deeper here than MAX_DEPTH allows (as if read
                // again).
                let depth = self.depth;
                let found = g.read.get(&h).and_then(|v| {
                    v.iter().find(|r| {
                        r.len == b - a
                            && depth + r.levels <= MAX_DEPTH
                            && &self.s[r.at as usize..(r.at + r.len) as usize] == text
                    })
                });
                if let Some(r) = found {
                    let n = r.node.clone();
                    self.pos += r.len as usize;
                    self.deepest = self.deepest.max(depth + r.levels);
                    self.sink.reused(&n);
                    return Some(n);
                }
                key = Some(h);
            }
        }
        let outer = std::mem::replace(&mut self.deepest, self.depth);
        let h = self.group_read()?;
        let levels = self.deepest - self.depth;
        self.deepest = self.deepest.max(outer);
        if let (Some(k), Some(g)) = (key, &mut self.groups) {
            let len = (self.pos - start) as u32;
            g.read.entry(k).or_default().push(Read {
                at: start as u32,
                len,
                levels,
                node: h.clone(),
            });
        }
        Some(h)
    }

    /// [`Parser::group`] read from its text.
    fn group_read(&mut self) -> Option<S::Node> {
        let ordered = self.s[self.pos..].starts_with(super::ordered::OPEN.as_bytes());
        let list = self.s[self.pos..].starts_with(super::ordered::LIST_OPEN.as_bytes());
        let set = self.s[self.pos..].starts_with(super::ordered::SET_OPEN.as_bytes());
        if !(ordered || list || set || self.s[self.pos..].starts_with(b"(?:"))
            || self.depth >= MAX_DEPTH
        {
            return None;
        }
        self.pos += 3;
        self.depth += 1;
        self.deepest = self.deepest.max(self.depth);
        let h = if set {
            let flags = super::ordered::read_flags(&self.s[self.pos..])?;
            self.pos += flags.text_len();
            let mut items = self.branches()?;
            if items.len() != flags.required.len() + usize::from(flags.extra) + 1 {
                return None;
            }
            let sep = items.remove(0);
            self.sink.member_set(flags, sep, items)?
        } else if ordered {
            let mut items = self.branches()?;
            if items.len() < 2 {
                return None;
            }
            let sep = items.remove(0);
            self.sink.ordered(sep, items)?
        } else if list {
            let mut parts = self.branches()?;
            if parts.len() != 2 {
                return None;
            }
            let item = parts.pop()?;
            let sep = parts.pop()?;
            self.sink.list(sep, item)?
        } else {
            self.alternation()?
        };
        self.depth -= 1;
        if self.peek() != Some(b')') {
            return None;
        }
        self.pos += 1;
        Some(h)
    }

    /// The next (unescaped) character.
    fn char(&mut self) -> Option<char> {
        let rest = &self.s[self.pos..];
        if let Some(&b) = rest.first().filter(|b| b.is_ascii()) {
            self.pos += 1;
            return Some(b as char);
        }
        let len = match rest.first()? {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        let c = std::str::from_utf8(rest.get(..len)?).ok()?.chars().next()?;
        self.pos += len;
        Some(c)
    }

    /// `(?-u:\xHH...)`: one or more byte escapes, as raw bytes, when the
    /// sink takes them.
    fn raw_group(&mut self) -> Option<S::Node> {
        let mut p = self.pos + 5;
        let mut bytes = Vec::new();
        while self.s.get(p..p + 2) == Some(b"\\x") {
            let d = self.s.get(p + 2..p + 4)?;
            if !d.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            bytes.push(u8::from_str_radix(std::str::from_utf8(d).ok()?, 16).ok()?);
            p += 4;
        }
        if bytes.is_empty() || self.s.get(p) != Some(&b')') {
            return None;
        }
        let h = self.sink.raw_bytes(bytes.into_boxed_slice())?;
        self.pos = p + 1;
        Some(h)
    }

    /// The character of an escape (after the backslash), when it is one.
    fn escape(&mut self) -> Option<char> {
        let b = self.peek()?;
        self.pos += 1;
        Some(match b {
            b'a' => '\x07',
            b'f' => '\x0C',
            b't' => '\t',
            b'n' => '\n',
            b'r' => '\r',
            b'v' => '\x0B',
            b'x' => return self.hex(),
            b'<' | b'>' => return None,
            _ if b.is_ascii_punctuation() || b == b' ' => b as char,
            _ => return None,
        })
    }

    /// `HH` or `{H...}` after `\x`.
    fn hex(&mut self) -> Option<char> {
        let digits = if self.peek() == Some(b'{') {
            let end = self.s[self.pos..].iter().position(|&b| b == b'}')?;
            let d = &self.s[self.pos + 1..self.pos + end];
            if d.is_empty() || d.len() > 8 {
                return None;
            }
            self.pos += end + 1;
            d
        } else {
            let d = self.s.get(self.pos..self.pos + 2)?;
            self.pos += 2;
            d
        };
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let v = u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
        char::from_u32(v)
    }

    /// `*`, `+`, `?`, `{n}`, `{n,}` or `{n,m}` (digits only).
    fn quantifier(&mut self) -> Option<(u32, Option<u32>)> {
        let b = self.peek()?;
        self.pos += 1;
        match b {
            b'*' => Some((0, None)),
            b'+' => Some((1, None)),
            b'?' => Some((0, Some(1))),
            _ => {
                let min = self.number()?;
                let r = match self.peek()? {
                    b'}' => (min, Some(min)),
                    b',' => {
                        self.pos += 1;
                        if self.peek()? == b'}' {
                            (min, None)
                        } else {
                            let max = self.number()?;
                            if self.peek()? != b'}' || max < min {
                                return None;
                            }
                            (min, Some(max))
                        }
                    }
                    _ => return None,
                };
                self.pos += 1;
                Some(r)
            }
        }
    }

    fn number(&mut self) -> Option<u32> {
        let n = self.s[self.pos..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if n == 0 || n > 9 {
            return None;
        }
        let v = std::str::from_utf8(&self.s[self.pos..self.pos + n])
            .ok()?
            .parse()
            .ok()?;
        self.pos += n;
        Some(v)
    }

    /// A bracketed class of characters and ranges (after the `[`).
    fn class(&mut self) -> Option<ClassUnicode> {
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        // `[]...]`, `[-...]` and the like are left to regex-syntax.
        if matches!(self.peek()?, b']' | b'-') {
            return None;
        }
        let mut cls = ClassUnicode::empty();
        loop {
            match self.peek()? {
                b']' => {
                    self.pos += 1;
                    break;
                }
                // Nested classes, POSIX classes, set operations.
                b'[' | b'&' | b'~' => return None,
                b'-' => {
                    // Only as the class's last character.
                    if self.s.get(self.pos + 1) != Some(&b']') {
                        return None;
                    }
                    self.pos += 1;
                    cls.push(ClassUnicodeRange::new('-', '-'));
                }
                _ => {
                    let lo = self.class_char()?;
                    let hi = if self.peek()? == b'-' && self.s.get(self.pos + 1) != Some(&b']') {
                        self.pos += 1;
                        if self.peek()? == b'-' {
                            return None;
                        }
                        let hi = self.class_char()?;
                        if hi < lo {
                            return None;
                        }
                        hi
                    } else {
                        lo
                    };
                    cls.push(ClassUnicodeRange::new(lo, hi));
                }
            }
        }
        if negated {
            cls.negate();
        }
        Some(cls)
    }

    fn class_char(&mut self) -> Option<char> {
        match self.peek()? {
            b'\\' => {
                self.pos += 1;
                self.escape()
            }
            b'[' | b'&' | b'~' | b'-' => None,
            _ => self.char(),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(p: &str) -> Option<Hir> {
        regex_syntax::ParserBuilder::new()
            .nest_limit(super::super::NEST_LIMIT)
            .build()
            .parse(p)
            .ok()
    }

    /// When the subset parser answers, it agrees with regex-syntax.
    fn agrees(p: &str) {
        if let Some(h) = parse(p) {
            assert_eq!(Some(h), reference(p), "pattern {p:?}");
        }
    }

    /// Patterns of the syntax the schema compiler writes (and one
    /// `\u{...}` escape, outside the subset).
    pub(in crate::dfa) const SCHEMA_PATTERNS: &[&str] = &[
        "",
        "abc",
        r#""(?:[^"\\\x00-\x1F]|\\["\\bfnrt]|\\u00[01][0-9a-fA-F])*""#,
        r"(?:-?(?:0|[1-9][0-9]{0,15}))(?:\.[0-9]+)?",
        r"(?:a|b|)c{2,}d{3}e?f+g*",
        r"\{[ \t\n\r]{0,2}(?:\x{1F600}|é|\u{0})?",
        r"(?:(?:)|x)",
        r"[a-zA-Z_\-][^\]\\]{1,5}?",
        "(?:null|true|false)",
        r"[\x00-\x{10FFFF}]",
        r"[^\x00-\x{10FFFF}]",
        "a|b|c",
        "(?:ab|ac|ad)",
    ];

    #[test]
    fn schema_syntax_is_parsed_and_equal() {
        for &p in SCHEMA_PATTERNS {
            if p.contains("\\u{") {
                assert!(parse(p).is_none(), "{p:?} is outside the subset");
                continue;
            }
            let h = parse(p).unwrap_or_else(|| panic!("{p:?} is in the subset"));
            assert_eq!(Some(h), reference(p), "pattern {p:?}");
        }
    }

    #[test]
    fn outside_the_subset_is_left_to_regex_syntax() {
        for p in [
            "(a)",
            "(?i:a)",
            ".",
            "^a$",
            r"\d",
            r"\p{L}",
            "[[a]]",
            "[a&&b]",
            "[]a]",
            "a**",
            "*a",
            "a{2,1}",
            "a{",
            "(?:a",
            "a)",
            "[a",
            r"\q",
            r"\xZZ",
            r"\x{D800}",
            "[z-a]",
            "a{,3}",
            r"\<",
        ] {
            assert!(parse(p).is_none(), "{p:?}");
        }
    }

    #[test]
    fn deep_nesting_goes_to_regex_syntax() {
        let p = format!("{}a{}", "(?:".repeat(300), ")".repeat(300));
        assert!(parse(&p).is_none());
        let p = format!("{}a{}", "(?:".repeat(100), ")".repeat(100));
        agrees(&p);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// Random texts over the subset's characters (and some outside it):
        /// never a disagreement, never an acceptance of an invalid text.
        #[test]
        fn random_texts_agree(p in r#"[-a-c()|?*+{}\[\]^\\,0-9:x"é\x00 ]{0,24}"#) {
            agrees(&p);
        }

        #[test]
        fn random_well_formed_patterns_agree(p in pattern()) {
            let h = parse(&p);
            prop_assert!(h.is_some(), "{p:?}");
            prop_assert_eq!(h, reference(&p), "{:?}", p);
        }
    }

    /// Well-formed patterns of the subset.
    pub(in crate::dfa) fn pattern() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            "[a-d\"é ,:]".prop_map(|s| s),
            r#"\\[\\"nt.\-\[{]"#.prop_map(|s| s),
            r"\\x[0-7][0-9A-F]".prop_map(|s| s),
            r"\[\^?(?:[a-f]|[a-f]-[m-z]|\\x[0-7][0-9a-f]|\\\]){1,4}\]".prop_map(|s| s),
        ];
        let quantified = (
            atom,
            r"(?:|\*|\+|\?|\{[0-3]\}|\{[0-3],\}|\{[0-3],[3-5]\})\??",
        )
            .prop_map(|(a, q)| format!("{a}{q}"));
        let leaf = prop::collection::vec(quantified, 0..4).prop_map(|v| v.concat());
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(|v| v.join("|")),
                (inner.clone(), r"(?:|\*|\{1,2\})").prop_map(|(s, q)| format!("(?:{s}){q}")),
                prop::collection::vec(inner, 1..3).prop_map(|v| v.concat()),
            ]
        })
    }
}

//! # Ordered members: one copy of each, `(?&SEP|K1|...|Kn)`
//!
//! An object whose properties are all optional matches the non-empty
//! subsequences of `K1 … Kn`, in order, joined by a separator: the comma
//! goes before a member only when one came before it. Any regex for that
//! language writes each member twice (`A_i = A_{i-1}(?:,K_i)?|K_i`), and a
//! member holding such an object doubles again, so nested optional objects
//! grow like 2^depth: MaskBench's Kubernetes schemas were 10–11 MB of
//! regex text from 190 KB of schema, three quarters of it the second copies.
//! An NFA needs only one copy of each member, entered either directly
//! (nothing written yet) or after the separator, and leaving into the one
//! state "something written".
//!
//! The schema compiler therefore writes the construct `(?&SEP|K1|...|Kn)`,
//! which no regex syntax has (regex-syntax rejects the `&` flag): the
//! [subset parser](super::parse) reads it when the caller allows it
//! (schema text, [`super::ByteDfa::build_schema`]), and
//! [`super::direct`] compiles it with one copy of each member. Everything
//! that reads schema text with regex-syntax (a pattern outside the subset,
//! the pushdown engine's fragments) or hands it to a user (the public
//! [`crate::schema::compile`]) calls [`expand`] first, which rewrites each
//! construct into the plain regex above: the same language, with the copies.
//!
//! An array's elements are the same story with one item: `ITEM(?:,ITEM)*`
//! writes the item twice. The schema compiler writes `(?*SEP|ITEM)` instead, compiled
//! with one copy of the item and of the separator, and written out as
//! `(?:ITEM(?:SEP ITEM)*)` by [`expand`].

use std::borrow::Cow;

/// How the construct opens.
pub(crate) const OPEN: &str = "(?&";

/// How the list construct opens: `(?*SEP|ITEM)` is `ITEM(?:SEP ITEM)*`
/// with one copy of the item (an array's elements: written out, every
/// array level doubles its item's text, as optional members do).
pub(crate) const LIST_OPEN: &str = "(?*";

/// How the member-set construct opens: `(?%FLAGS|SEP|K1|...|Kn)`, the
/// declared members `Ki` in any order, each at most once, every one whose
/// flag is `R` present, and with a last flag `X` an extra member `Kn` that
/// may repeat ([`super::regs`]). Written out for regex syntax, the members
/// keep their order (as an object without any order writes them).
pub(crate) const SET_OPEN: &str = "(?%";

/// The flags of a member set ([`SET_OPEN`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SetFlags {
    /// Per declared member, whether it is required.
    pub required: Vec<bool>,
    /// Whether the last item is the extra member.
    pub extra: bool,
}

impl SetFlags {
    /// The flags' length in the text, with the `|` after them.
    pub(crate) fn text_len(&self) -> usize {
        self.required.len() + usize::from(self.extra) + 1
    }
}

/// The member-set construct (at least two items in all; the last of
/// `items` the extra member when `flags.extra`), for the tests (the
/// schema compiler writes these constructs as shared pieces of text).
#[cfg(test)]
pub(crate) fn write_set(sep: &str, flags: &SetFlags, items: &[&str]) -> String {
    let (required, extra) = (&flags.required, flags.extra);
    debug_assert_eq!(required.len() + usize::from(extra), items.len());
    let mut s = String::from(SET_OPEN);
    s.extend(required.iter().map(|&r| if r { 'R' } else { 'O' }));
    if extra {
        s.push('X');
    }
    s.push('|');
    s.push_str(sep);
    for k in items {
        s.push('|');
        s.push_str(k);
    }
    s.push(')');
    s
}

/// The flags of a member set at the start of `s` (up to its `|`, not
/// included): per declared member whether it is required, and whether an
/// extra member follows them.
pub(crate) fn read_flags(s: &[u8]) -> Option<SetFlags> {
    let mut required = Vec::new();
    let mut extra = false;
    for &b in s {
        match b {
            b'R' | b'O' if !extra => required.push(b == b'R'),
            b'X' if !extra => extra = true,
            b'|' if !required.is_empty() => return Some(SetFlags { required, extra }),
            _ => return None,
        }
    }
    None
}

/// The list construct: one or more `item`s joined by `sep` (neither with
/// an alternation at its top level).
#[cfg(test)]
pub(crate) fn write_list(sep: &str, item: &str) -> String {
    let mut s = String::with_capacity(LIST_OPEN.len() + sep.len() + item.len() + 2);
    s.push_str(LIST_OPEN);
    s.push_str(sep);
    s.push('|');
    s.push_str(item);
    s.push(')');
    s
}

/// The construct for the non-empty ordered subsequences of `items`
/// joined by `sep` (at least one item).
#[cfg(test)]
pub(crate) fn write(sep: &str, items: &[&str]) -> String {
    debug_assert!(!items.is_empty());
    if items.len() == 1 {
        return items[0].to_string();
    }
    let len = OPEN.len() + sep.len() + items.iter().map(|k| k.len() + 1).sum::<usize>() + 1;
    let mut s = String::with_capacity(len);
    s.push_str(OPEN);
    s.push_str(sep);
    for k in items {
        s.push('|');
        s.push_str(k);
    }
    s.push(')');
    s
}

/// The expanded text would run past the limit given to [`expand`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLong;

/// `text` with every construct rewritten into plain regex syntax (inner
/// ones first), at most `limit` bytes; borrowed when it has none.
pub(crate) fn expand(text: &str, limit: usize) -> Result<Cow<'_, str>, TooLong> {
    if !has_construct(text) {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len().min(limit));
    expand_into(text, limit, &mut out)?;
    Ok(Cow::Owned(out))
}

/// The length [`expand`] would return, without writing the text (the
/// schema compiler knows it from its pieces: the tests check the two agree).
#[cfg(test)]
pub(crate) fn expanded_len(text: &str, limit: usize) -> Result<usize, TooLong> {
    if !has_construct(text) {
        return if text.len() > limit {
            Err(TooLong)
        } else {
            Ok(text.len())
        };
    }
    let mut out = Count(0);
    expand_into(text, limit, &mut out)?;
    Ok(out.0)
}

/// The length of the ordered construct written out, from the lengths of
/// its separator and items written out (as [`expanded_len`] counts it).
pub(crate) fn ordered_plain_len(sep: usize, items: &[usize]) -> usize {
    let (sep, items) = counts(sep, items);
    let mut out = Count(0);
    plain(&sep, &items.iter().collect::<Vec<_>>(), &mut out);
    out.0
}

/// The length of the list construct written out, as
/// [`ordered_plain_len`].
pub(crate) fn list_plain_len(sep: usize, item: usize) -> usize {
    let mut out = Count(0);
    plain_list(&Count(sep), &Count(item), &mut out);
    out.0
}

/// The length of a member set written out, as [`ordered_plain_len`].
pub(crate) fn set_plain_len(sep: usize, items: &[usize], flags: &SetFlags) -> usize {
    let (sep, items) = counts(sep, items);
    let mut out = Count(0);
    plain_set(&sep, &items.iter().collect::<Vec<_>>(), flags, &mut out);
    out.0
}

fn counts(sep: usize, items: &[usize]) -> (Count, Vec<Count>) {
    (Count(sep), items.iter().map(|&k| Count(k)).collect())
}

/// Whether `text` may hold a construct.
fn has_construct(text: &str) -> bool {
    text.contains(OPEN) || text.contains(LIST_OPEN) || text.contains(SET_OPEN)
}

fn expand_into<O: Out>(text: &str, limit: usize, out: &mut O) -> Result<(), TooLong> {
    let mut x = Expander {
        s: text.as_bytes(),
        pos: 0,
        limit,
    };
    x.until_close(out)?;
    if x.pos != x.s.len() {
        // An unmatched `)`: left for the regex parser to report.
        out.push(&text[x.pos..]);
    }
    if out.len() > limit {
        return Err(TooLong);
    }
    Ok(())
}

/// Where the expansion goes: the text, or only its length.
trait Out: Default {
    fn push(&mut self, s: &str);
    fn part(&mut self, p: &Self);
    fn len(&self) -> usize;
}

impl Out for String {
    fn push(&mut self, s: &str) {
        self.push_str(s);
    }
    fn part(&mut self, p: &Self) {
        self.push_str(p);
    }
    fn len(&self) -> usize {
        String::len(self)
    }
}

#[derive(Default)]
struct Count(usize);

impl Out for Count {
    fn push(&mut self, s: &str) {
        self.0 = self.0.saturating_add(s.len());
    }
    fn part(&mut self, p: &Self) {
        self.0 = self.0.saturating_add(p.0);
    }
    fn len(&self) -> usize {
        self.0
    }
}

struct Expander<'a> {
    s: &'a [u8],
    pos: usize,
    limit: usize,
}

impl Expander<'_> {
    /// Copies text into `out` up to an unmatched `)` or `|` at this level
    /// (not consumed) or the end, expanding constructs on the way.
    fn until_close<O: Out>(&mut self, out: &mut O) -> Result<(), TooLong> {
        let mut depth = 0usize;
        let mut from = self.pos;
        while let Some(&b) = self.s.get(self.pos) {
            match b {
                b'\\' => self.pos += 2,
                b'[' => self.skip_class(),
                b'(' if self.s[self.pos..].starts_with(OPEN.as_bytes())
                    || self.s[self.pos..].starts_with(LIST_OPEN.as_bytes())
                    || self.s[self.pos..].starts_with(SET_OPEN.as_bytes()) =>
                {
                    let list = self.s[self.pos..].starts_with(LIST_OPEN.as_bytes());
                    let set = self.s[self.pos..].starts_with(SET_OPEN.as_bytes());
                    out.push(self.text(from, self.pos));
                    self.pos += OPEN.len();
                    let flags = if set {
                        let f = read_flags(&self.s[self.pos..]).ok_or(TooLong)?;
                        self.pos += f.text_len();
                        Some(f)
                    } else {
                        None
                    };
                    let mut parts: Vec<O> = Vec::new();
                    loop {
                        let mut part = O::default();
                        self.until_close(&mut part)?;
                        parts.push(part);
                        match self.s.get(self.pos) {
                            Some(b'|') => self.pos += 1,
                            Some(b')') => {
                                self.pos += 1;
                                break;
                            }
                            // Unclosed: left as it is for the parser.
                            _ => return Err(TooLong),
                        }
                    }
                    let sep = parts.remove(0);
                    let items: Vec<&O> = parts.iter().collect();
                    if items.is_empty() || (list && items.len() != 1) {
                        return Err(TooLong);
                    }
                    if let Some(f) = flags {
                        if items.len() != f.required.len() + usize::from(f.extra) {
                            return Err(TooLong);
                        }
                        plain_set(&sep, &items, &f, out);
                    } else if list {
                        plain_list(&sep, items[0], out);
                    } else {
                        plain(&sep, &items, out);
                    }
                    if out.len() > self.limit {
                        return Err(TooLong);
                    }
                    from = self.pos;
                    continue;
                }
                b'(' => {
                    depth += 1;
                    self.pos += 1;
                }
                b')' if depth == 0 => break,
                b')' => {
                    depth -= 1;
                    self.pos += 1;
                }
                b'|' if depth == 0 => break,
                _ => self.pos += 1,
            }
        }
        self.pos = self.pos.min(self.s.len());
        out.push(self.text(from, self.pos));
        Ok(())
    }

    fn text(&self, from: usize, to: usize) -> &str {
        std::str::from_utf8(&self.s[from..to.min(self.s.len())]).unwrap_or("")
    }

    /// Past a bracketed class (nested classes included; a `]` first in a
    /// class is a literal).
    fn skip_class(&mut self) {
        let mut depth = 0usize;
        loop {
            // At a `[`: open, and take a leading `^` and `]` as literal.
            self.pos += 1;
            depth += 1;
            if self.s.get(self.pos) == Some(&b'^') {
                self.pos += 1;
            }
            if self.s.get(self.pos) == Some(&b']') {
                self.pos += 1;
            }
            loop {
                match self.s.get(self.pos) {
                    None => return,
                    Some(b'\\') => self.pos += 2,
                    Some(b'[') => break,
                    Some(b']') => {
                        self.pos += 1;
                        depth -= 1;
                        if depth == 0 {
                            return;
                        }
                    }
                    Some(_) => self.pos += 1,
                }
            }
        }
    }
}

/// A member set written out for regex syntax: the members in order (the
/// required ones in place, each optional one where it stands), any extra
/// members after the declared ones.
fn plain_set<O: Out>(sep: &O, items: &[&O], flags: &SetFlags, out: &mut O) {
    let (required, extra) = (&flags.required[..], flags.extra);
    let declared = &items[..required.len()];
    let group = |out: &mut O, parts: &[&O], tail: &str| {
        out.push("(?:");
        for p in parts {
            out.part(p);
        }
        out.push(tail);
    };
    match required.iter().position(|&r| r) {
        Some(r) => {
            for k in &declared[..r] {
                group(out, &[k, sep], ")?");
            }
            out.part(declared[r]);
            for (k, &req) in declared.iter().zip(required).skip(r + 1) {
                if req {
                    out.part(sep);
                    out.part(k);
                } else {
                    group(out, &[sep, k], ")?");
                }
            }
        }
        None if extra => {
            out.push("(?:");
            plain(sep, declared, out);
            out.push("|");
            out.part(items[required.len()]);
            out.push(")");
        }
        None => plain(sep, declared, out),
    }
    if extra {
        group(out, &[sep, items[required.len()]], ")*");
    }
}

/// The list construct written out: `(?:ITEM(?:SEP ITEM)*)`.
fn plain_list<O: Out>(sep: &O, item: &O, out: &mut O) {
    out.push("(?:");
    out.part(item);
    out.push("(?:");
    out.part(sep);
    out.part(item);
    out.push(")*)");
}

/// The plain regex of the construct: short runs nest linearly
/// (`A_i = A_{i-1}(?:SEP K_i)? | K_i`); long ones split in halves,
/// `NE(l,r) = NE(l,m) E(m,r) | NE(m,r)` with the flat
/// `E(m,r) = (?:SEP K_m)?...(?:SEP K_{r-1})?`, so that the regex nests
/// O(log n) deep (regex-syntax's nest limit is 250).
fn plain<O: Out>(sep: &O, items: &[&O], out: &mut O) {
    const RUN: usize = 40;
    if items.len() <= RUN {
        let mut a = O::default();
        a.part(items[0]);
        for k in &items[1..] {
            let mut n = O::default();
            n.push("(?:");
            n.part(&a);
            n.push("(?:");
            n.part(sep);
            n.part(k);
            n.push(")?|");
            n.part(k);
            n.push(")");
            a = n;
        }
        out.part(&a);
        return;
    }
    let m = items.len() / 2;
    out.push("(?:");
    plain(sep, &items[..m], out);
    for k in &items[m..] {
        out.push("(?:");
        out.part(sep);
        out.part(k);
        out.push(")?");
    }
    out.push("|");
    plain(sep, &items[m..], out);
    out.push(")");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(expand("a(?:b|c)", 100), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn constructs_expand_inner_first() {
        let inner = write(",", &["x", "y"]);
        let outer = write(",", &["a", &format!("\\{{{inner}\\}}"), "[(|)]"]);
        let e = expand(&outer, 1 << 20).unwrap();
        let re = regex::Regex::new(&format!("^(?:{e})$")).unwrap();
        for ok in ["a", "{x}", "a,{y}", "a,{x,y},(", "|", "a,|", "{x},)"] {
            assert!(re.is_match(ok), "{ok} in {e}");
        }
        for bad in ["", "a,", ",a", "{x},a", "{}", "{y,x}", "a,a", "(,a"] {
            assert!(!re.is_match(bad), "{bad} in {e}");
        }
        // A single item is itself; the limit is an error.
        assert_eq!(write(",", &["k"]), "k");
        assert_eq!(expand(&outer, 10), Err(TooLong));
    }

    #[test]
    fn lists_expand_to_one_or_more_items() {
        let inner = write_list(";", "x");
        let w = format!(
            "\\[(?:{})?\\]",
            write_list(",", &format!("(?:\\{{{inner}\\}}|y)"))
        );
        let e = expand(&w, 1 << 20).unwrap();
        let re = regex::Regex::new(&format!("^(?:{e})$")).unwrap();
        for ok in ["[]", "[y]", "[{x}]", "[{x;x},y,{x}]"] {
            assert!(re.is_match(ok), "{ok} in {e}");
        }
        for bad in ["[,]", "[y,]", "[{}]", "[{x;}]", "[y y]"] {
            assert!(!re.is_match(bad), "{bad} in {e}");
        }
    }

    #[test]
    fn the_length_alone_is_the_written_out_length() {
        let items: Vec<String> = (0..90).map(|i| format!("k{i}")).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let list = write_list(";", &write(",", &["a", "b(?:c|d)", "[)|]"]));
        for t in [
            "plain(?:a|b)".to_string(),
            write(",", &refs),
            format!("x{}y", write(",", &["a", &format!("\\[{list}\\]"), "\\)"])),
        ] {
            let e = expand(&t, usize::MAX).unwrap();
            assert_eq!(expanded_len(&t, usize::MAX), Ok(e.len()), "{t}");
            assert_eq!(expanded_len(&t, e.len()), Ok(e.len()));
            assert_eq!(expanded_len(&t, e.len() - 1), Err(TooLong));
        }
    }

    #[test]
    fn long_runs_split_in_halves() {
        let items: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let w = write(",", &refs);
        let e = expand(&w, 1 << 20).unwrap();
        let re = regex::Regex::new(&format!("^(?:{e})$")).unwrap();
        assert!(re.is_match("k0,k50,k99"));
        assert!(re.is_match("k99"));
        assert!(!re.is_match("k50,k0"));
        assert!(!re.is_match("k3,k3"));
    }
}

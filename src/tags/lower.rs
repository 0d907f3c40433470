//! A [`Format`] tree → the schema compiler's text: one regex text, or
//! fragments that call one another when an embedded JSON Schema is
//! recursive.
//!
//! Every format but an embedded recursive schema is regular, so the whole
//! tag is one regex text in the schema compiler's syntax (its one-copy
//! constructs allowed), built bottom up: literals escaped, a `regex`
//! validated and grouped, a `json_schema` written by the schema compiler,
//! a `grammar` lowered to a syntax tree and printed. A recursive schema
//! becomes fragments: its document and definitions are appended after the
//! tag's own text (fragment 0), their call markers renumbered, and the tag
//! calls its document by a marker. Free text is written through the exact
//! boolean algebra ([`super::text`]).

use super::text::Texts;
use super::{Format, Tag, TagError, TokenName, TokenRef};
use crate::grammar::gbnf::{self, Gbnf, GbnfOptions};
use crate::region::TokenBudget;
use crate::schema::regex::{compile_fragments_compact, marker, SchemaFragments, ANY_VALUE};
use crate::schema::{Pointer, SchemaOptions, SchemaWarning};

/// What a structural tag lowers to.
#[derive(Debug)]
pub(crate) struct Lowered {
    /// Fragment names (`[0]`: the tag itself).
    pub names: Vec<String>,
    /// Fragment bodies, compact schema text with call markers (`None`: a
    /// body that admits no text). With one fragment, the body is the
    /// whole language and holds no marker.
    pub bodies: Vec<Option<String>>,
    /// What the embedded schemas' compiler narrowed or downgraded.
    pub warnings: Vec<SchemaWarning>,
    /// The output's leading region bounded in tokens (`any_text.max_tokens`).
    pub budget: Option<Budget>,
}

/// A budget in tokens on the content of the tag that opens the output
/// (spellings are made by the compiler, which knows the vocabulary's
/// symbols).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The tag's begin (empty: the output opens inside it).
    pub begin: String,
    /// The tag's ends.
    pub ends: Vec<String>,
    /// `max_tokens`.
    pub max_tokens: u32,
}

impl Budget {
    /// The budget over the bytes the index walks: each special token's text
    /// in the begin or an end also spelled as the token (`symbols`: text,
    /// spelling).
    pub fn token_budget(&self, symbols: &[(String, Vec<u8>)]) -> Option<TokenBudget> {
        let spell = |t: &str| spellings(t, symbols);
        TokenBudget::new(
            spell(&self.begin),
            self.ends.iter().flat_map(|e| spell(e)).collect(),
            self.max_tokens,
        )
    }
}

/// Every spelling of `text`: each special token's text in it (longest
/// first) read as the text or as the token.
fn spellings(text: &str, symbols: &[(String, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut i = 0;
    while i < text.len() {
        let sym = symbols
            .iter()
            .filter(|(t, _)| !t.is_empty() && text[i..].starts_with(t.as_str()))
            .max_by_key(|(t, _)| t.len());
        let n = match sym {
            Some((t, spelled)) if out.len() < 64 => {
                out = out
                    .into_iter()
                    .flat_map(|o| {
                        let mut a = o.clone();
                        a.extend_from_slice(t.as_bytes());
                        let mut b = o;
                        b.extend_from_slice(spelled);
                        [a, b]
                    })
                    .collect();
                t.len()
            }
            _ => {
                let n = text[i..].chars().next().map_or(1, char::len_utf8);
                out.iter_mut()
                    .for_each(|o| o.extend_from_slice(&text.as_bytes()[i..i + n]));
                n
            }
        };
        i += n;
    }
    out
}

/// The budget of `f`: `max_tokens` on the `any_text` that is the whole
/// content of the tag the output opens with (through the first elements of
/// sequences and optional parts). Any other `max_tokens` is refused by name.
fn leading_budget(f: &Format) -> Result<Option<(Pointer, Budget)>, TagError> {
    fn lead(f: &Format) -> Option<(Pointer, Budget)> {
        match f {
            Format::Sequence { elements, .. } => elements.first().and_then(lead),
            Format::Repeat {
                content,
                min: 0,
                max: Some(1),
                ..
            } => lead(content),
            Format::Tag(Tag {
                begin: TokenRef::Text(begin),
                content,
                ends,
                ..
            }) => match content.as_ref() {
                Format::AnyText {
                    at,
                    max_tokens: Some(n),
                    ..
                } => Some((
                    at.clone(),
                    Budget {
                        begin: begin.clone(),
                        ends: ends.clone(),
                        max_tokens: *n,
                    },
                )),
                _ => None,
            },
            _ => None,
        }
    }
    let found = lead(f);
    let mut other = None;
    visit(f, &mut |g| {
        if let Format::AnyText {
            at,
            max_tokens: Some(_),
            ..
        } = g
        {
            if other.is_none() && found.as_ref().is_none_or(|(p, _)| p != at) {
                other = Some(at.clone());
            }
        }
    });
    if let Some(at) = other {
        return Err(TagError::Unsupported {
            pointer: at.push("max_tokens"),
            construct: "any_text max_tokens".into(),
            reason: "a budget in tokens is kept for the content of the tag that opens the output (a reasoning block); bound other free text with max_chars".into(),
        });
    }
    Ok(found)
}

/// Calls `g` on every node of `f`.
fn visit(f: &Format, g: &mut impl FnMut(&Format)) {
    g(f);
    match f {
        Format::Sequence { elements, .. } | Format::Or { elements, .. } => {
            elements.iter().for_each(|e| visit(e, g))
        }
        Format::Repeat { content, .. } => visit(content, g),
        Format::Tag(t) => visit(&t.content, g),
        Format::TriggeredTags { tags, .. } | Format::TagsWithSeparator { tags, .. } => {
            tags.iter().for_each(|t| visit(&t.content, g))
        }
        Format::Dispatch { rules, .. } => rules.iter().for_each(|(_, e)| visit(e, g)),
        Format::TokenTriggeredTags { tags, .. } => tags.iter().for_each(|t| visit(&t.content, g)),
        Format::TokenDispatch { rules, .. } => rules.iter().for_each(|(_, e)| visit(e, g)),
        Format::Const { .. }
        | Format::JsonSchema { .. }
        | Format::Grammar { .. }
        | Format::Regex { .. }
        | Format::AnyText { .. }
        | Format::Token { .. }
        | Format::ExcludeToken { .. }
        | Format::AnyTokens { .. } => {}
    }
}

/// The vocabulary's tokens a structural tag can name.
#[derive(Clone, Debug, Default)]
pub(crate) struct VocabTokens {
    /// Special tokens that are symbols of the language: (id, text,
    /// spelling).
    pub symbols: Vec<(u32, String, Vec<u8>)>,
    /// Stop tokens: (id, text).
    pub stops: Vec<(u32, String)>,
}

impl VocabTokens {
    /// (text, spelling) of every symbol.
    pub fn spellings(&self) -> Vec<(String, Vec<u8>)> {
        self.symbols
            .iter()
            .map(|(_, t, b)| (t.clone(), b.clone()))
            .collect()
    }
}

/// The regex of a symbol's spelling.
fn spelled(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("\\x{x:02X}")).collect();
    format!("(?-u:{hex})")
}

/// Lowers `f` with `opts` for its embedded schemas. `pda`: whether the
/// vocabulary can run fragments (every single byte is a token); without
/// it a recursive schema is refused. `tokens`: the vocabulary's special
/// tokens; wherever a begin, an end, a trigger or a constant holds a
/// symbol's text, the token is allowed there too, and the token-level
/// formats name them.
pub(crate) fn lower(
    f: &Format,
    opts: &SchemaOptions,
    pda: bool,
    tokens: &VocabTokens,
) -> Result<Lowered, TagError> {
    let mut symbols: Vec<(String, String)> = tokens
        .symbols
        .iter()
        .filter(|(_, t, _)| !t.is_empty())
        .map(|(_, t, b)| (t.clone(), spelled(b)))
        .collect();
    // Longest first: a text that holds another symbol's text is read whole.
    symbols.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
    let (budget_at, budget) = leading_budget(f)?.unzip();
    let mut l = Lowerer {
        budget_at,
        tokens,
        end_symbols: Vec::new(),
        opts,
        pda,
        symbols,
        texts: Texts::new(opts),
        names: vec!["(structural tag)".into()],
        bodies: vec![None],
        any_value: None,
        warnings: Vec::new(),
    };
    let root = l.format(f, &[])?;
    let Some(root) = root else {
        return Err(TagError::Empty {
            pointer: Pointer::root(),
        });
    };
    l.bodies[0] = Some(root);
    Ok(Lowered {
        names: l.names,
        bodies: l.bodies,
        warnings: l.warnings,
        budget,
    })
}

struct Lowerer<'a> {
    /// The `any_text` whose `max_tokens` is kept beside the language.
    budget_at: Option<Pointer>,
    tokens: &'a VocabTokens,
    /// The end tokens of the nearest enclosing tag closed by a token,
    /// which free tokens inside it may not hold.
    end_symbols: Vec<String>,
    opts: &'a SchemaOptions,
    pda: bool,
    /// Special tokens: (text, regex of the spelling), longest text first.
    symbols: Vec<(String, String)>,
    texts: Texts<'a>,
    names: Vec<String>,
    bodies: Vec<Option<String>>,
    /// The fragment of the shared "any JSON value", once appended.
    any_value: Option<usize>,
    warnings: Vec<SchemaWarning>,
}

/// `Some(text)`, or `None` for the empty language.
type Text = Option<String>;

fn group(s: &str) -> String {
    format!("(?:{s})")
}

fn lit(s: &str) -> String {
    regex_syntax::escape(s)
}

/// The any-order regex budget under a tag's `any_order` (bytes).
const ANY_ORDER_LEN: usize = 64 * 1024;

impl Lowerer<'_> {
    /// `s` as a literal, each special token's text in it also spelled as
    /// the token.
    fn lit(&self, s: &str) -> String {
        if self.symbols.is_empty() {
            return lit(s);
        }
        let mut out = String::new();
        let (mut i, mut plain) = (0, 0);
        while i < s.len() {
            match self
                .symbols
                .iter()
                .find(|(t, _)| s[i..].starts_with(t.as_str()))
            {
                Some((t, spelled)) => {
                    out.push_str(&lit(&s[plain..i]));
                    out.push_str(&format!("(?:{}|{spelled})", lit(t)));
                    i += t.len();
                    plain = i;
                }
                None => i += s[i..].chars().next().map_or(1, char::len_utf8),
            }
        }
        out.push_str(&lit(&s[plain..]));
        out
    }

    /// The spelling of the special token whose text `t` starts with, and
    /// the rest of `t`.
    fn leading_symbol<'t>(&self, t: &'t str) -> Option<(String, &'t str)> {
        self.symbols
            .iter()
            .find(|(text, _)| t.starts_with(text.as_str()))
            .map(|(text, spelled)| (spelled.clone(), &t[text.len()..]))
    }
}

/// The alternation of the non-empty texts (`None` when all are empty).
fn alt(items: impl IntoIterator<Item = Text>) -> Text {
    let items: Vec<String> = items.into_iter().flatten().collect();
    match items.len() {
        0 => None,
        1 => Some(items.into_iter().next().unwrap()),
        _ => Some(group(&items.join("|"))),
    }
}

/// The concatenation (`None` when any part is empty).
fn cat(items: impl IntoIterator<Item = Text>) -> Text {
    let mut out = String::new();
    for i in items {
        out.push_str(&group(&i?));
    }
    Some(out)
}

/// `x{min,max}` (`max` `None`: unbounded).
fn repeat(x: Text, min: u32, max: Option<u32>) -> Text {
    let Some(x) = x else {
        // Only the empty repetition is left.
        return (min == 0).then(String::new);
    };
    Some(match (min, max) {
        (0, Some(1)) => format!("(?:{x})?"),
        (0, None) => format!("(?:{x})*"),
        (1, None) => format!("(?:{x})+"),
        (m, None) => format!("(?:{x}){{{m},}}"),
        (m, Some(n)) => format!("(?:{x}){{{m},{n}}}"),
    })
}

impl Lowerer<'_> {
    /// The text of `f`; `ends`: the end strings of the nearest enclosing
    /// tag, which free text inside it may not hold (XGrammar's automatic
    /// end detection).
    fn format(&mut self, f: &Format, ends: &[String]) -> Result<Text, TagError> {
        Ok(match f {
            Format::Const { value, .. } => Some(self.lit(value)),
            Format::Regex { at, pattern } => Some(group(&regex(pattern, at)?)),
            Format::JsonSchema {
                at,
                schema,
                style,
                any_order,
            } => self.schema(at, schema, style, *any_order)?,
            Format::Grammar { at, text } => Some(group(&grammar(text, at)?)),
            Format::AnyText {
                at,
                excludes,
                max_chars,
                max_tokens,
            } => {
                // `leading_budget` has refused any other.
                debug_assert!(max_tokens.is_none() || self.budget_at.as_ref() == Some(at));
                let mut stop = excludes.clone();
                stop.extend(ends.iter().cloned());
                self.texts.free(&stop, *max_chars, at)?
            }
            Format::Sequence { elements, .. } => {
                let mut parts = Vec::with_capacity(elements.len());
                for e in elements {
                    parts.push(self.format(e, ends)?);
                }
                cat(parts)
            }
            Format::Or { elements, .. } => {
                let mut parts = Vec::with_capacity(elements.len());
                for e in elements {
                    parts.push(self.format(e, ends)?);
                }
                alt(parts)
            }
            Format::Repeat {
                content, min, max, ..
            } => {
                let x = self.format(content, ends)?;
                repeat(x, *min, *max)
            }
            Format::Tag(t) => self.tag(t)?,
            Format::TriggeredTags {
                at,
                triggers,
                tags,
                at_least_one,
                stop_after_first,
                excludes,
            } => {
                // Each tag belongs to the trigger its begin starts with.
                let mut by_trigger: Vec<Vec<Text>> = vec![Vec::new(); triggers.len()];
                let mut whole = Vec::with_capacity(tags.len());
                for (i, t) in tags.iter().enumerate() {
                    let bp = at.push("tags").push_index(i).push("begin");
                    let TokenRef::Text(begin) = &t.begin else {
                        return Err(TagError::Invalid {
                            pointer: bp,
                            message: "a tag of triggered_tags begins with text (token begins are for token_triggered_tags)".into(),
                        });
                    };
                    if t.end_token.is_some() {
                        return Err(TagError::Invalid {
                            pointer: bp,
                            message: "a tag of triggered_tags ends with text (token ends are for token_triggered_tags)".into(),
                        });
                    }
                    let owners: Vec<usize> = (0..triggers.len())
                        .filter(|&k| begin.starts_with(&triggers[k]))
                        .collect();
                    let &[k] = owners.as_slice() else {
                        return Err(TagError::Invalid {
                            pointer: bp,
                            message: if owners.is_empty() {
                                format!("the begin {begin:?} starts with none of the triggers")
                            } else {
                                format!("the begin {begin:?} starts with more than one trigger")
                            },
                        });
                    };
                    let content = self.format(&t.content, &t.ends)?;
                    let ends = alt(t.ends.iter().map(|e| Some(self.lit(e))));
                    by_trigger[k].push(cat([
                        Some(self.lit(&begin[triggers[k].len()..])),
                        content.clone(),
                        ends.clone(),
                    ]));
                    whole.push(cat([Some(self.lit(begin)), content, ends]));
                }
                let rest: Vec<(String, Text)> = triggers
                    .iter()
                    .cloned()
                    .zip(by_trigger.into_iter().map(alt))
                    .collect();
                self.dispatch(
                    at,
                    &rest,
                    alt(whole),
                    *at_least_one,
                    !*stop_after_first,
                    excludes,
                    ends,
                )?
            }
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
                ..
            } => {
                let mut parts = Vec::with_capacity(tags.len());
                for t in tags {
                    parts.push(self.tag(t)?);
                }
                let one = alt(parts);
                let many = if *stop_after_first {
                    one
                } else {
                    cat([
                        one.clone(),
                        repeat(cat([Some(self.lit(separator)), one]), 0, None),
                    ])
                };
                if *at_least_one {
                    many
                } else {
                    repeat(many, 0, Some(1))
                }
            }
            Format::Dispatch {
                at,
                rules,
                looped,
                excludes,
            } => {
                let mut rest = Vec::with_capacity(rules.len());
                for (pattern, f) in rules {
                    rest.push((pattern.clone(), self.format(f, ends)?));
                }
                self.dispatch(at, &rest, None, false, *looped, excludes, ends)?
            }
            Format::Token { at, token } => Some(self.symbol(&at.push("token"), token)?),
            Format::ExcludeToken { at } => {
                return Err(TagError::Unsupported {
                    pointer: at.clone(),
                    construct: "the token-level format \"exclude_token\"".into(),
                    reason: "one token of any text is no language over bytes (two tokens spell what one does); use any_tokens, or const_string / regex for the text".into(),
                })
            }
            Format::AnyTokens {
                at,
                exclude,
                max_tokens,
            } => {
                if max_tokens.is_some() {
                    return Err(TagError::Unsupported {
                        pointer: at.push("max_tokens"),
                        construct: "any_tokens max_tokens".into(),
                        reason: "a budget in tokens is kept for an any_text that opens the output; use any_text".into(),
                    });
                }
                let mut out = self.excluded(exclude)?;
                out.extend(self.end_symbols.iter().cloned());
                Some(self.free_tokens(&out))
            }
            Format::TokenTriggeredTags {
                at,
                triggers,
                tags,
                exclude,
                at_least_one,
                stop_after_first,
            } => {
                let mut trig = Vec::with_capacity(triggers.len());
                for (p, t) in triggers {
                    trig.push(self.symbol(p, t)?);
                }
                let mut parts = Vec::with_capacity(tags.len());
                for (i, t) in tags.iter().enumerate() {
                    let bp = at.push("tags").push_index(i).push("begin");
                    let TokenRef::Token(b) = &t.begin else {
                        return Err(TagError::Invalid {
                            pointer: bp,
                            message: "a tag of token_triggered_tags begins with a token ({\"type\": \"token\", ...})".into(),
                        });
                    };
                    if !trig.contains(&self.symbol(&bp, b)?) {
                        return Err(TagError::Invalid {
                            pointer: bp,
                            message: format!("the begin {b} is none of the trigger tokens"),
                        });
                    }
                    parts.push(self.tag(t)?);
                }
                let mut out = self.excluded(exclude)?;
                out.extend(trig);
                out.extend(self.end_symbols.iter().cloned());
                let free = Some(self.free_tokens(&out));
                let one = alt(parts);
                match (*at_least_one, *stop_after_first) {
                    (false, false) => cat([free.clone(), repeat(cat([one, free]), 0, None)]),
                    (true, false) => cat([
                        one.clone(),
                        repeat(cat([free.clone(), one]), 0, None),
                        free,
                    ]),
                    (false, true) => cat([free, repeat(one, 0, Some(1))]),
                    (true, true) => one,
                }
            }
            Format::TokenDispatch {
                rules,
                looped,
                exclude,
                ..
            } => {
                let mut out = self.excluded(exclude)?;
                out.extend(self.end_symbols.iter().cloned());
                let mut parts = Vec::with_capacity(rules.len());
                for ((p, t), f) in rules {
                    let sym = self.symbol(p, t)?;
                    out.push(sym.clone());
                    parts.push(cat([Some(sym), self.format(f, ends)?]));
                }
                let free = Some(self.free_tokens(&out));
                let one = alt(parts);
                if *looped {
                    cat([free.clone(), repeat(cat([one, free]), 0, None)])
                } else {
                    cat([free, repeat(one, 0, Some(1))])
                }
            }
        })
    }

    /// The spelling (regex) of `t`, which must be a special token.
    fn symbol(&self, at: &Pointer, t: &TokenName) -> Result<String, TagError> {
        self.resolve(at, t)?.ok_or_else(|| TagError::Unsupported {
            pointer: at.clone(),
            construct: format!("the stop {t}"),
            reason: "a stop token ends the output and stands nowhere inside it".into(),
        })
    }

    /// The spelling (regex) of `t` if it is a special token, `None` if it
    /// is a stop token; any other token is refused.
    fn resolve(&self, at: &Pointer, t: &TokenName) -> Result<Option<String>, TagError> {
        let named = |id: u32, text: &str| match t {
            TokenName::Id(i) => *i == id,
            TokenName::Text(s) => s == text,
        };
        if let Some((_, _, b)) = self.tokens.symbols.iter().find(|(i, x, _)| named(*i, x)) {
            return Ok(Some(spelled(b)));
        }
        if self.tokens.stops.iter().any(|(i, x)| named(*i, x)) {
            return Ok(None);
        }
        Err(TagError::Unsupported {
            pointer: at.clone(),
            construct: format!("{t}"),
            reason: "it is no special token of the vocabulary: constrain matches special (added) tokens by id; write ordinary text with const_string or regex".into(),
        })
    }

    /// The spellings of the special tokens among `exclude` (stop tokens
    /// are never inside the output, so excluding one changes nothing).
    fn excluded(&self, exclude: &[(Pointer, TokenName)]) -> Result<Vec<String>, TagError> {
        let mut out = Vec::new();
        for (p, t) in exclude {
            out.extend(self.resolve(p, t)?);
        }
        Ok(out)
    }

    /// Any text and any special token but `excluded` (spellings).
    fn free_tokens(&self, excluded: &[String]) -> String {
        let mut parts = vec!["(?s:.)".to_string()];
        for (_, _, b) in &self.tokens.symbols {
            let s = spelled(b);
            if !excluded.contains(&s) && !parts.contains(&s) {
                parts.push(s);
            }
        }
        format!("(?:{})*", parts.join("|"))
    }

    /// `begin content end` (any of the ends).
    fn tag(&mut self, t: &Tag) -> Result<Text, TagError> {
        let begin = match &t.begin {
            TokenRef::Text(b) => self.lit(b),
            TokenRef::Token(b) => self.symbol(&t.at.push("begin"), b)?,
        };
        let end_symbols = match &t.end_token {
            Some((p, e)) => vec![self.symbol(p, e)?],
            None => Vec::new(),
        };
        let ends = if end_symbols.is_empty() {
            alt(t.ends.iter().map(|e| Some(self.lit(e))))
        } else {
            Some(end_symbols[0].clone())
        };
        let outer = std::mem::replace(&mut self.end_symbols, end_symbols);
        let content = self.format(&t.content, &t.ends);
        self.end_symbols = outer;
        Ok(cat([Some(begin), content?, ends]))
    }

    /// Free text that dispatches on the first trigger it completes: each
    /// `(trigger, rest)` is a trigger and what must follow it. `first`:
    /// when the output must begin with one of these (`at_least_one`), the
    /// whole of one of them. `looped`: free text and dispatches go on
    /// after the first; otherwise at most one dispatch and nothing after.
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &mut self,
        at: &Pointer,
        rest: &[(String, Text)],
        first: Text,
        at_least_one: bool,
        looped: bool,
        excludes: &[String],
        ends: &[String],
    ) -> Result<Text, TagError> {
        let triggers: Vec<String> = rest.iter().map(|(t, _)| t.clone()).collect();
        let mut stop: Vec<String> = excludes.to_vec();
        stop.extend(ends.iter().cloned());
        let mut steps = Vec::with_capacity(rest.len());
        let mut free_stop = stop.clone();
        free_stop.extend(triggers.iter().cloned());
        let free = self.texts.free(&free_stop, None, at)?;
        for (t, r) in rest {
            let mut upto = self.texts.until(&stop, &triggers, t, at)?;
            // A trigger that opens with a special token's text is also
            // completed by the token itself, after free text (which never
            // holds a token).
            if let Some((spelled, tail)) = self.leading_symbol(t) {
                upto = alt([
                    upto,
                    cat([free.clone(), Some(spelled), Some(self.lit(tail))]),
                ]);
            }
            steps.push(cat([upto, r.clone()]));
        }
        let step = alt(steps);
        Ok(match (at_least_one, looped) {
            (false, true) => cat([repeat(step, 0, None), free]),
            (true, true) => cat([first, repeat(step, 0, None), free]),
            (false, false) => alt([step, free]),
            (true, false) => first,
        })
    }

    /// An embedded JSON Schema: its regex, or its fragments appended and
    /// called.
    fn schema(
        &mut self,
        at: &Pointer,
        schema: &serde_json::Value,
        style: &str,
        any_order: bool,
    ) -> Result<Text, TagError> {
        let any_opts;
        let opts = if any_order {
            // A tag asks for any order outright: allow a larger regex than
            // the compliant mode's opportunistic 4 KiB (the XML elements
            // carry raw-string bodies, a few hundred bytes each).
            any_opts = SchemaOptions {
                any_order: true,
                any_order_max_len: self.opts.any_order_max_len.max(ANY_ORDER_LEN),
                ..self.opts.clone()
            };
            &any_opts
        } else {
            self.opts
        };
        if style != "json" {
            return super::xml::lower(schema, style, at, opts, &self.texts, &mut self.warnings);
        }
        let sp = at.push("json_schema");
        let wrap = |e: crate::schema::SchemaError| TagError::Schema {
            pointer: sp.clone(),
            source: e,
        };
        match compile_fragments_compact(schema, opts).map_err(wrap)? {
            SchemaFragments::Regex(c) => {
                self.warnings.extend(c.warnings);
                Ok(Some(group(&c.regex)))
            }
            SchemaFragments::Fragments {
                names,
                bodies,
                warnings,
            } => {
                if !self.pda {
                    return Err(TagError::Unsupported {
                        pointer: sp,
                        construct: "a recursive JSON Schema".into(),
                        reason: "recursion needs the pushdown engine, which needs every single byte in the vocabulary".into(),
                    });
                }
                self.warnings.extend(warnings);
                // Fragment i of the schema becomes `ids[i]`: first the
                // indices, then the bodies renumbered with them. The shared
                // "any JSON value" (the same language under the same
                // options, calling only itself) is kept once.
                let base = self.names.len();
                let mut ids = Vec::with_capacity(names.len());
                let mut next = base;
                for n in &names {
                    match self.any_value {
                        Some(i) if n == ANY_VALUE => ids.push(i),
                        _ => {
                            ids.push(next);
                            next += 1;
                        }
                    }
                }
                for (i, (n, b)) in names.into_iter().zip(bodies).enumerate() {
                    if ids[i] < base {
                        continue;
                    }
                    let body = b.map(|t| renumber(&t, &ids)).transpose().map_err(|m| {
                        TagError::Invalid {
                            pointer: sp.clone(),
                            message: m,
                        }
                    })?;
                    if n == ANY_VALUE {
                        self.any_value = Some(ids[i]);
                        self.names.push(n);
                    } else {
                        self.names.push(format!("{sp}{n}"));
                    }
                    self.bodies.push(body);
                }
                if self.names.len() > u16::MAX as usize {
                    return Err(TagError::Invalid {
                        pointer: sp,
                        message: "the embedded schemas need more than 65,535 fragments".into(),
                    });
                }
                Ok(Some(marker(ids[0] as u16)))
            }
        }
    }
}

/// `text` with every call marker `(?-u:\xF8\xHH\xLL)` to fragment `i`
/// rewritten to call `ids[i]`.
fn renumber(text: &str, ids: &[usize]) -> Result<String, String> {
    const HEAD: &str = "(?-u:\\xF8\\x";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(HEAD) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + HEAD.len()..];
        // `HH\xLL)`
        let (hi, lo) = (tail.get(0..2), tail.get(4..6));
        let id = match (hi, lo, tail.get(2..4), tail.get(6..7)) {
            (Some(hi), Some(lo), Some("\\x"), Some(")")) => u8::from_str_radix(hi, 16)
                .ok()
                .zip(u8::from_str_radix(lo, 16).ok()),
            _ => None,
        };
        let Some((hi, lo)) = id else {
            return Err("a call marker in the schema text could not be read".into());
        };
        let old = u16::from_be_bytes([hi, lo]) as usize;
        let Some(&new) = ids.get(old) else {
            return Err("a call marker names no fragment of the schema".into());
        };
        out.push_str(&marker(new as u16));
        rest = &tail[7..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A `regex` format's pattern, checked on its own (full match; a leading
/// `^` and a trailing `$` are dropped, as the pattern is anchored anyway).
fn regex(pattern: &str, at: &Pointer) -> Result<String, TagError> {
    let mut p = pattern;
    if let Some(s) = p.strip_prefix('^') {
        p = s;
    }
    if p.ends_with('$') && !p.ends_with("\\$") {
        p = &p[..p.len() - 1];
    }
    regex_syntax::ParserBuilder::new()
        .build()
        .parse(p)
        .map_err(|e| TagError::Regex {
            pointer: at.push("pattern"),
            message: e.to_string(),
        })?;
    Ok(p.to_string())
}

/// A `grammar` format (XGrammar's EBNF, read as GBNF): its language as
/// regex text. A grammar whose recursion needs a stack is refused here.
fn grammar(text: &str, at: &Pointer) -> Result<String, TagError> {
    let gp = at.push("grammar");
    let wrap = |e: gbnf::GbnfError| TagError::Grammar {
        pointer: gp.clone(),
        source: e,
    };
    let g = Gbnf::parse("grammar", text).map_err(wrap)?;
    let opts = GbnfOptions::default();
    if gbnf::lower::fragments(&g, &opts).map_err(wrap)?.is_some() {
        return Err(TagError::Unsupported {
            pointer: gp,
            construct: "a recursive grammar".into(),
            reason: "grammars whose recursion needs a stack are not supported inside structural tags yet".into(),
        });
    }
    let hir = gbnf::lower(&g, &opts).map_err(wrap)?;
    Ok(hir.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_renumbered_and_other_text_kept() {
        let t = format!("a{}b{}c", marker(0), marker(2));
        let r = renumber(&t, &[5, 6, 300]).unwrap();
        assert_eq!(r, format!("a{}b{}c", marker(5), marker(300)));
        assert!(renumber(&marker(3), &[1]).is_err());
    }

    #[test]
    fn anchors_at_the_edges_are_dropped() {
        let at = Pointer::root();
        assert_eq!(regex("^ab$", &at).unwrap(), "ab");
        assert_eq!(regex("ab\\$", &at).unwrap(), "ab\\$");
        assert!(regex("(", &at).is_err());
    }
}

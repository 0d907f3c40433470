//! Objects: the extra-key trie (a key that is none of the declared names),
//! the declared properties in order or in any order, and
//! [`Gen::object`], which puts them together. Split from `regex.rs` by job.

use super::*;
use crate::dfa::algebra::Op;
use crate::dfa::sets::MAX_MEMBERS;
use crate::schema::PropertyOrder;

pub(super) struct TrieNode {
    pub(super) terminal: bool,
    pub(super) children: BTreeMap<Unit, TrieNode>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Unit {
    Plain(char),
    Esc(char),
}

pub(super) fn key_units(name: &str) -> Option<Vec<Unit>> {
    name.chars()
        .map(|c| match c {
            '"' => Some(Unit::Esc('"')),
            '\\' => Some(Unit::Esc('\\')),
            '\u{8}' => Some(Unit::Esc('b')),
            '\u{c}' => Some(Unit::Esc('f')),
            '\n' => Some(Unit::Esc('n')),
            '\r' => Some(Unit::Esc('r')),
            '\t' => Some(Unit::Esc('t')),
            c if (c as u32) < 0x20 => None, // not writable as an extra key anyway
            c => Some(Unit::Plain(c)),
        })
        .collect()
}

/// A key unit as regex text, appended to `out`.
pub(super) fn unit_text_into(u: Unit, out: &mut String) {
    let mut buf = [0u8; 4];
    match u {
        Unit::Plain(c) => regex_syntax::escape_into(c.encode_utf8(&mut buf), out),
        Unit::Esc(c) => {
            out.push_str("\\\\");
            regex_syntax::escape_into(c.encode_utf8(&mut buf), out);
        }
    }
}

pub(super) fn class_escape(c: char) -> String {
    if c.is_ascii_alphanumeric() || (c as u32) > 0x7F {
        c.to_string()
    } else {
        format!("\\{c}")
    }
}

/// Any key unit other than the given ones, as regex text (`None`: none left).
/// With `ascii_only`, characters at or above U+0080 are left out (the
/// caller offers them once for every node, see [`non_ascii_exits`]).
pub(super) fn other_units(
    children: &BTreeMap<Unit, TrieNode>,
    ascii_only: bool,
    escapes: super::super::Escapes,
) -> Option<String> {
    let mut plain = String::from(r#"[^"\\\x00-\x1F"#);
    if ascii_only {
        plain.push_str(r"\x{80}-\x{10FFFF}");
    }
    let mut escs: Vec<char> = ['"', '\\', 'b', 'f', 'n', 'r', 't']
        .into_iter()
        .filter(|&c| escapes.allows_short(c))
        .collect();
    for u in children.keys() {
        match *u {
            Unit::Plain(c) => plain.push_str(&class_escape(c)),
            Unit::Esc(c) => escs.retain(|&e| e != c),
        }
    }
    plain.push(']');
    let mut parts = vec![plain];
    if !escs.is_empty() {
        let cls: String = escs.iter().map(|&c| class_escape(c)).collect();
        parts.push(format!("\\\\[{cls}]"));
    }
    alt_all_text(parts)
}

/// A trie-shaped regex: every path from `node` to a node where `here`
/// offers something, followed by that something; `None` when no node does.
/// Written into one buffer (a node's alternation is `(?:OFFER|U1 PATHS1|...)`
/// as [`alt_all`] writes it): built bottom-up with `format!`, each unit of a
/// deep key's path was copied once per level above it.
pub(super) fn trie_paths(
    node: &TrieNode,
    here: &dyn Fn(&TrieNode) -> Option<String>,
) -> Option<String> {
    /// Per node in pre-order: its offer, its subtree's size (in nodes), and
    /// whether the subtree offers anything.
    struct Scan {
        offer: Vec<Option<String>>,
        size: Vec<u32>,
        live: Vec<bool>,
    }
    fn scan(n: &TrieNode, here: &dyn Fn(&TrieNode) -> Option<String>, sc: &mut Scan) -> bool {
        let i = sc.offer.len();
        let offer = here(n);
        let mut live = offer.is_some();
        sc.offer.push(offer);
        sc.size.push(0);
        sc.live.push(false);
        for child in n.children.values() {
            live |= scan(child, here, sc);
        }
        sc.size[i] = (sc.offer.len() - i) as u32;
        sc.live[i] = live;
        live
    }
    fn write(n: &TrieNode, i: usize, sc: &mut Scan, out: &mut String) {
        let mut c = i + 1;
        let mut count = sc.offer[i].is_some() as usize;
        for _ in n.children.values() {
            count += sc.live[c] as usize;
            c += sc.size[c] as usize;
        }
        if count > 1 {
            out.push_str("(?:");
        }
        let mut first = true;
        if let Some(x) = sc.offer[i].take() {
            out.push_str(&x);
            first = false;
        }
        let mut c = i + 1;
        for (u, child) in &n.children {
            if sc.live[c] {
                if !first {
                    out.push('|');
                }
                first = false;
                unit_text_into(*u, out);
                write(child, c, sc, out);
            }
            c += sc.size[c] as usize;
        }
        if count > 1 {
            out.push(')');
        }
    }
    let mut sc = Scan {
        offer: Vec::new(),
        size: Vec::new(),
        live: Vec::new(),
    };
    if !scan(node, here, &mut sc) {
        return None;
    }
    let mut out = String::new();
    write(node, 0, &mut sc, &mut out);
    Some(out)
}

/// The proper prefixes in the trie that are not names themselves (keys that
/// stop early).
pub(super) fn non_names(node: &TrieNode) -> Option<String> {
    trie_paths(node, &|n| (!n.terminal).then(String::new))
}

/// Every trie path followed by a first unit that leaves the trie. Whatever
/// follows is free, so callers append one shared `KEY_CHAR*`: one copy of
/// the free tail instead of one per trie node keeps the DFA from holding a
/// separate "rest of the key" for every prefix (measured: about a third
/// fewer states on compliant-mode objects).
pub(super) fn divergent(node: &TrieNode, escapes: super::super::Escapes) -> Option<String> {
    trie_paths(node, &|n| {
        other_units(&n.children, !has_non_ascii_child(n), escapes)
    })
}

pub(super) fn has_non_ascii_child(node: &TrieNode) -> bool {
    node.children
        .keys()
        .any(|u| matches!(u, Unit::Plain(c) if !c.is_ascii()))
}

/// The trie paths to nodes without a non-ASCII child: there every character
/// at or above U+0080 leaves the trie. Offering that character once after
/// this regex, rather than inside each node's class, lets the DFA share the
/// states inside a multi-byte character across all nodes.
pub(super) fn non_ascii_exits(node: &TrieNode) -> Option<String> {
    trie_paths(node, &|n| (!has_non_ascii_child(n)).then(String::new))
}

/// Regex for a JSON string key that is none of `names`.
pub(super) fn extra_key(names: &[String], escapes: super::super::Escapes) -> String {
    let mut root = TrieNode {
        terminal: false,
        children: BTreeMap::new(),
    };
    for n in names {
        let Some(units) = key_units(n) else { continue };
        let mut cur = &mut root;
        for u in units {
            cur = cur.children.entry(u).or_insert(TrieNode {
                terminal: false,
                children: BTreeMap::new(),
            });
        }
        cur.terminal = true;
    }
    let unit = if escapes.is_all() {
        KEY_CHAR.to_string()
    } else {
        escapes.unit(false, false)
    };
    if root.children.is_empty() && !root.terminal {
        return format!("\"{unit}*\"");
    }
    // Keys that are a proper prefix of a name, or that leave the names'
    // trie at some unit and continue freely.
    let exits: Vec<String> = [
        divergent(&root, escapes),
        non_ascii_exits(&root).map(|p| format!(r"{p}[\x{{80}}-\x{{10FFFF}}]")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let parts: Vec<String> = [
        non_names(&root),
        alt_all_text(exits).map(|d| format!("{d}{unit}*")),
    ]
    .into_iter()
    .flatten()
    .collect();
    match alt_all_text(parts) {
        Some(k) => format!("\"{k}\""),
        // Unreachable in practice: some unit always leaves the trie.
        None => "[^\\x00-\\x{10FFFF}]".into(),
    }
}

/// A declared key with its value.
pub(super) struct Prop {
    pub(super) kv: Rx,
    pub(super) required: bool,
}

impl Gen<'_, '_> {
    pub(super) fn object(&mut self, n: &Node, forbid: &[String]) -> Result<Lang, SchemaError> {
        // The document's own object (no container entered yet) may give
        // its implicit extra keys deeper values
        // ([`SchemaOptions::root_extra_value_depth`]).
        let root = self.containers == 0;
        self.containers += 1;
        let r = self.object_body(n, forbid, root);
        self.containers -= 1;
        r
    }

    fn object_body(
        &mut self,
        n: &Node,
        forbid: &[String],
        root: bool,
    ) -> Result<Lang, SchemaError> {
        if !n.property_names.is_empty() {
            return self.object_with_names(n, forbid);
        }
        // The key language of extra keys when `propertyNames` narrows it.
        let names_key = self.extra_key_lang.take();
        let Lay {
            inner,
            comma,
            colon,
            ..
        } = self.lay.clone();
        let mut extras_schema = self.extras_schema(n);
        let mut declared: Vec<(String, Schema)> = n.properties.clone();
        // patternProperties: one pattern (or several whose schemas are all
        // `true`). Declared keys matching it also take its schema; extra keys
        // are then only keys matching it (keys matching no pattern are left
        // out unless the pattern's schema is `true`: a sound narrowing).
        let mut pattern_extra: Option<(String, Schema)> = None;
        let mut pattern_matches_declared = false;
        let mut multi_patterns = false;
        if !n.pattern_properties.is_empty() {
            let trivial = n.pattern_properties.iter().all(|(_, s)| {
                matches!(s, Schema::Bool(true)) || matches!(s, Schema::Node(x) if x.is_trivial())
            });
            let distinct: Vec<&String> = {
                let mut v: Vec<&String> =
                    n.pattern_properties.iter().map(|(p, _)| &p.value).collect();
                v.dedup();
                v
            };
            // With a `propertyNames` key language, keys are split by
            // region too (each region within that language).
            if (!trivial && distinct.len() > 1) || names_key.is_some() {
                // Several patterns: every key meets each pattern that
                // matches it (declared keys here; extra keys by region in
                // `pattern_regions`).
                for (k, s) in declared.iter_mut() {
                    let hits = pattern_hits(&n.pattern_properties, k)?;
                    if !hits.is_empty() {
                        let mut all = vec![s.clone()];
                        all.extend(hits);
                        *s = all_of(&n.at, all);
                    }
                }
                multi_patterns = true;
            } else {
                let (p, ps) = &n.pattern_properties[0];
                for (k, s) in declared.iter_mut() {
                    match ir::pattern_matches(&p.value, k) {
                        Some(true) => {
                            pattern_matches_declared = true;
                            if !trivial {
                                *s = Schema::Node(std::sync::Arc::new(Node {
                                    at: n.at.clone(),
                                    all_of: vec![s.clone(), ps.clone()],
                                    ..Default::default()
                                }));
                            }
                        }
                        Some(false) => {}
                        None => {
                            return Err(SchemaError::Pattern {
                                pointer: p.at.clone(),
                                detail: format!("{:?} cannot be compiled", p.value),
                            })
                        }
                    }
                }
                let keeps_plain_extras = trivial
                    && !matches!(n.additional, Some(ref a) if !matches!(a, Schema::Bool(true)));
                if !keeps_plain_extras {
                    // Keys matching the pattern, with its schema(s).
                    let schema = if trivial {
                        Schema::Bool(true)
                    } else {
                        ps.clone()
                    };
                    let pats: Vec<String> = distinct.iter().map(|s| s.to_string()).collect();
                    let alternatives = pats.join("|");
                    pattern_extra = Some((
                        if pats.len() == 1 {
                            pats[0].clone()
                        } else {
                            alternatives
                        },
                        schema,
                    ));
                    extras_schema = None;
                }
            }
        }
        for r in &n.required {
            if declared.iter().any(|(k, _)| k == r) {
                continue;
            }
            if multi_patterns {
                let hits = pattern_hits(&n.pattern_properties, r)?;
                if !hits.is_empty() {
                    declared.push((r.clone(), all_of(&n.at, hits)));
                    continue;
                }
            }
            if let Some((p, ps)) = &pattern_extra {
                if ir::pattern_matches(p, r) == Some(true) {
                    declared.push((r.clone(), ps.clone()));
                    continue;
                }
            }
            match &n.additional {
                Some(Schema::Bool(false)) => {
                    return self.contradiction(SchemaError::Contradiction {
                        pointer: n.at.clone(),
                        detail: format!(
                        "required property \"{r}\" is not allowed by additionalProperties: false"
                    ),
                    })
                }
                Some(s) => declared.push((r.clone(), s.clone())),
                None => declared.push((r.clone(), Schema::Bool(true))),
            }
        }
        let mut names: Vec<String> = declared.iter().map(|(k, _)| k.clone()).collect();
        for f in forbid {
            if !names.contains(f) {
                names.push(f.clone());
            }
        }
        let mut props: Vec<Prop> = Vec::new();
        for (k, s) in &declared {
            let required = n.required.contains(k);
            if forbid.contains(k) {
                if required {
                    return Ok(None);
                }
                continue;
            }
            match self.value(s, &[])? {
                Some(v) => props.push(Prop {
                    kv: rx![regex_syntax::escape(&py_string(k)), &colon, v],
                    required,
                }),
                None if required => return Ok(None),
                None => {}
            }
        }
        let extra = if multi_patterns {
            self.pattern_regions(n, extras_schema.as_ref(), &names, names_key.clone())?
        } else {
            match &extras_schema {
                None => match &pattern_extra {
                    Some((p, ps))
                        if !pattern_matches_declared
                            && !names
                                .iter()
                                .any(|k| ir::pattern_matches(p, k) == Some(true)) =>
                    {
                        let key = match self.pattern_regex(p, 0, None, false) {
                            Ok(c) => c.regex,
                            Err(e) => {
                                return Err(SchemaError::Pattern {
                                    pointer: n.at.clone(),
                                    detail: format!("patternProperties {p:?}: {e}"),
                                })
                            }
                        };
                        match (key, self.value(ps, &[])?) {
                            (Some(k), Some(v)) => Some(rx!["\"", k, "\"", &colon, v]),
                            _ => None,
                        }
                    }
                    _ => None,
                },
                Some(Schema::Bool(true)) if n.additional.is_none() => {
                    // Compliant mode's implicit extras: a cheaper free-form
                    // value beside declared keys; an object that declares
                    // nothing is itself a free-form object (`{"type":
                    // "object"}`), its values as deep as any free-form
                    // value's.
                    let declares_nothing = declared.is_empty() && n.pattern_properties.is_empty();
                    if declares_nothing {
                        self.note_explicit_free_form();
                    }
                    let depth = if declares_nothing {
                        self.opts
                            .free_form_depth
                            .saturating_sub(1)
                            .max(self.opts.extra_value_depth)
                    } else if root {
                        self.opts
                            .extra_value_depth
                            .max(self.opts.root_extra_value_depth)
                    } else {
                        self.opts.extra_value_depth
                    };
                    let v = self.free_form(depth);
                    let k = names_key.clone().unwrap_or_else(|| self.free_key(&names));
                    Some(rx![k, &colon, v])
                }
                Some(s) => self.value(s, &[])?.map(|v| {
                    let k = names_key.clone().unwrap_or_else(|| self.free_key(&names));
                    rx![k, &colon, v]
                }),
            }
        };
        let req = props.iter().filter(|p| p.required).count() as u64;
        let total = props.len() as u64;
        let min_p = n.min_properties.unwrap_or(0);
        let max_p = n.max_properties;
        if max_p.is_some_and(|m| m < min_p) {
            return self.contradiction(SchemaError::Contradiction {
                pointer: n.at.clone(),
                detail: format!(
                    "minProperties {min_p} is greater than maxProperties {}",
                    max_p.unwrap()
                ),
            });
        }
        if max_p.is_some_and(|m| m < req) {
            return Ok(None);
        }
        let empty = rx!["\\{", &inner, "\\}"];
        let wrap = |m: Rx| rx!["\\{", &inner, "(?:", m, ")", &inner, "\\}"];
        if max_p == Some(0) {
            return Ok(Some(empty));
        }
        // Only extras (no declared keys): counted exactly.
        if props.is_empty() {
            let Some(x) = extra else {
                return Ok(if min_p == 0 { Some(empty) } else { None });
            };
            // Counting written keys only bounds the *distinct* keys from
            // above (a key may repeat), so a minimum of 2 or more cannot be
            // guaranteed.
            let mut min_p = min_p;
            if min_p >= 2 {
                self.doc.soft(
                    SchemaError::UnsupportedValue {
                        what: "minProperties".into(),
                        pointer: n.at.clone(),
                        detail: format!(
                            "minProperties {min_p} over undeclared keys (distinct keys cannot be counted)"
                        ),
                    },
                    self.opts.lenient,
                )?;
                min_p = 1;
            }
            let a = min_p.saturating_sub(1);
            let b = max_p.map(|m| m - 1);
            if b.unwrap_or(a) > self.opts.max_repeat {
                return Err(SchemaError::TooBig {
                    what: "property count bound".into(),
                    pointer: n.at.clone(),
                    size: b.unwrap_or(a),
                    limit: self.opts.max_repeat,
                    knob: "max_repeat",
                });
            }
            let m = rx![&x, "(?:", &comma, &x, ")", repeat(a, b)];
            return Ok(Some(if min_p == 0 {
                rx!["\\{", &inner, "(?:", m, ")?", &inner, "\\}"]
            } else {
                wrap(m)
            }));
        }
        let implied_max = max_p.is_none_or(|m| extra.is_none() && m >= total);
        let counted = (min_p > req && !(min_p == 1 && implied_max)) || !implied_max;
        // Any order by a member set: up to 64 declared properties, when the
        // count is implied.
        let wants_any = self.opts.mode == JsonMode::Compliant
            || self.opts.any_order
            || self.opts.property_order == PropertyOrder::Any;
        // A few small members: every order written out (no registers, the
        // cheapest first visits); past that, a member set.
        let small_tree = (wants_any
            && props.len() >= 2
            && props.len() <= self.opts.any_order_max_properties
            && !counted)
            .then(|| any_order_tree(&props, 0, false, &comma, req == 0))
            .filter(|t| t.len() <= self.opts.any_order_max_len);
        let set = wants_any
            && self.opts.member_sets
            && !counted
            && small_tree.is_none()
            && (2..=MAX_MEMBERS).contains(&props.len());
        let limit = if counted {
            self.opts.any_order_max_properties
        } else {
            MAX_MEMBERS
        };
        if self.opts.any_order && props.len() > limit {
            return Err(SchemaError::TooBig {
                what: "object with properties in any order".into(),
                pointer: n.at.clone(),
                size: props.len() as u64,
                limit: limit as u64,
                knob: "any_order_max_properties",
            });
        }
        let any_order = wants_any
            && counted
            && props.len() >= 2
            && props.len() <= self.opts.any_order_max_properties;
        if counted {
            // The count matters: members counted exactly (`counted`).
            let members = counted::Members {
                props: &props,
                extra: extra.as_ref(),
                comma: &comma,
                lo: min_p,
                hi: max_p,
            };
            match members.nonempty(any_order, self.opts.max_regex_len) {
                Ok(m) => {
                    let optional = min_p == 0 && req == 0;
                    return Ok(match m {
                        Some(m) if optional => {
                            Some(rx!["\\{", &inner, "(?:", m, ")?", &inner, "\\}"])
                        }
                        Some(m) => Some(wrap(m)),
                        None if optional => Some(empty),
                        None => None,
                    });
                }
                Err(counted::TooLong) => {
                    return Err(SchemaError::TooBig {
                        what: "minProperties/maxProperties: counted members".into(),
                        pointer: n.at.clone(),
                        size: self.opts.max_regex_len as u64 + 1,
                        limit: self.opts.max_regex_len as u64,
                        knob: "max_regex_len",
                    })
                }
            }
        }
        // Here the count is implied, or only asks for one member.
        let nonempty = min_p > req;
        let extras_tail = extra
            .as_ref()
            .map(|x| rx!["(?:", &comma, x, ")*"])
            .unwrap_or(Rx::EMPTY);
        // The subset tree repeats every value about e·(n-1)! times: only when
        // that stays small (scalar-valued objects, typically).
        let tree = small_tree;
        let members: Rx;
        let optional: bool;
        if set {
            // (Written out, for regex syntax and the pushdown engine's
            // fragments, the members keep their order: the permutation
            // regex did not fit.)
            let flags = crate::dfa::ordered::SetFlags {
                required: props.iter().map(|p| p.required).collect(),
                extra: extra.is_some(),
            };
            let mut items: Vec<Rx> = props.iter().map(|p| p.kv.clone()).collect();
            items.extend(extra.clone());
            members = set_rx(&comma, &flags, items);
            optional = req == 0 && !nonempty;
        } else if let Some(known) = tree {
            if req > 0 {
                members = rx![known, extras_tail];
                optional = false;
            } else {
                members = match &extra {
                    Some(x) => rx!["(?:", known, "|", x, ")", extras_tail],
                    None => known,
                };
                optional = !nonempty;
            }
        } else if let Some(r) = props.iter().position(|p| p.required) {
            let mut s = Vec::new();
            for p in &props[..r] {
                s.push(rx!["(?:", &p.kv, &comma, ")?"]);
            }
            s.push(props[r].kv.clone());
            for p in &props[r + 1..] {
                if p.required {
                    s.push(rx![&comma, &p.kv]);
                } else {
                    s.push(rx!["(?:", &comma, &p.kv, ")?"]);
                }
            }
            s.push(extras_tail);
            members = Rx::cat(s);
            optional = false;
        } else {
            let a = ordered_nonempty(&props, &comma);
            members = match &extra {
                Some(x) => rx!["(?:", a, "|", x, ")", extras_tail],
                None => a,
            };
            optional = !nonempty;
        }
        Ok(Some(if optional {
            rx!["\\{", &inner, "(?:", members, ")?", &inner, "\\}"]
        } else {
            wrap(members)
        }))
    }
}

/// Non-empty ordered subsequences of `props`, comma-separated (no key is
/// required): the ordered-members construct `(?&SEP|K1|...|Kn)`, which
/// keeps one copy of each value ([`crate::dfa::ordered`]; any plain regex
/// writes each twice, so nested optional objects grew like 2^depth).
pub(super) fn ordered_nonempty(props: &[Prop], comma: &Rx) -> Rx {
    ordered_rx(comma, props.iter().map(|p| p.kv.clone()).collect())
}

/// Any order, each key at most once, required keys present. `skip_empty`:
/// leave out the empty sequence at the top (the caller makes it optional).
pub(super) fn any_order_tree(
    props: &[Prop],
    used: u32,
    started: bool,
    comma: &Rx,
    skip_empty: bool,
) -> Rx {
    let mut out = Vec::new();
    any_order_tree_into(props, used, started, comma, skip_empty, &mut out);
    Rx::cat(out)
}

/// [`any_order_tree`], its pieces appended to `out`.
fn any_order_tree_into(
    props: &[Prop],
    used: u32,
    started: bool,
    comma: &Rx,
    skip_empty: bool,
    out: &mut Vec<Rx>,
) {
    let all_required = props
        .iter()
        .enumerate()
        .all(|(i, p)| !p.required || used & (1 << i) != 0);
    let empty = all_required && !(skip_empty && !started);
    let unused = (0..props.len()).filter(|&i| used & (1 << i) == 0).count();
    let count = unused + empty as usize;
    if count != 1 {
        out.push(Rx::from("(?:"));
    }
    // The empty alternative, when there is one, comes first.
    let mut first = !empty;
    for (i, p) in props.iter().enumerate() {
        if used & (1 << i) != 0 {
            continue;
        }
        if !first {
            out.push(Rx::from("|"));
        }
        first = false;
        if started {
            out.push(comma.clone());
        }
        out.push(p.kv.clone());
        any_order_tree_into(props, used | (1 << i), true, comma, skip_empty, out);
    }
    if count != 1 {
        out.push(Rx::from(")"));
    }
}

/// The schemas of the `patternProperties` entries whose pattern matches
/// `key` (an error when a pattern cannot be compiled).
pub(super) fn pattern_hits(
    pats: &[(ir::Located<String>, Schema)],
    key: &str,
) -> Result<Vec<Schema>, SchemaError> {
    let mut out = Vec::new();
    for (p, ps) in pats {
        match ir::pattern_matches(&p.value, key) {
            Some(true) => out.push(ps.clone()),
            Some(false) => {}
            None => {
                return Err(SchemaError::Pattern {
                    pointer: p.at.clone(),
                    detail: format!("{:?} cannot be compiled", p.value),
                })
            }
        }
    }
    Ok(out)
}

/// `allOf` of `parts` as one schema: at `at`, or where one of the parts
/// holds `uniqueItems`, at that part's pointer. The run-time check
/// ([`crate::unique`]) knows an array by the schemas that apply at its
/// place, and a member's key brings each of the parts there (a declared
/// name's schema and each pattern's that matches), so an array checked by
/// that part's place is checked here too.
pub(super) fn all_of(at: &Pointer, parts: Vec<Schema>) -> Schema {
    let at = parts
        .iter()
        .find_map(|p| match p {
            Schema::Node(n) if n.unique_items => Some(n.at.clone()),
            _ => None,
        })
        .unwrap_or_else(|| at.clone());
    Schema::Node(std::sync::Arc::new(Node {
        at,
        all_of: parts,
        ..Default::default()
    }))
}

impl Gen<'_, '_> {
    /// One extra member (`key: value`) of an object with several
    /// `patternProperties`, exactly: the undeclared keys are split by which
    /// patterns match them; a key matched by the patterns `S` takes the
    /// `allOf` of their schemas, a key matched by none takes `rest` (the
    /// `additionalProperties` schema; `None`: not allowed). Key regions are
    /// products of the pattern languages (intersection and difference
    /// within canonical spellings, as `extra_key` writes keys).
    fn pattern_regions(
        &mut self,
        n: &Node,
        rest: Option<&Schema>,
        names: &[String],
        names_key: Option<Rx>,
    ) -> Result<Lang, SchemaError> {
        let pats = &n.pattern_properties;
        let at = &pats[0].0.at;
        // (At most 2^24 regions, whatever `max_branches` says: the masks
        // below are u32.)
        let regions = 1u64 << pats.len().min(63);
        if regions > (self.opts.max_branches as u64).min(1 << 24) {
            return Err(SchemaError::TooBig {
                what: "patternProperties key regions".into(),
                pointer: n.at.clone(),
                size: regions,
                limit: self.opts.max_branches as u64,
                knob: "max_branches",
            });
        }
        let colon = self.lay.colon.clone();
        let base = names_key.unwrap_or_else(|| self.free_key(names));
        let mut langs: Vec<Option<String>> = Vec::new();
        for (p, _) in pats {
            match self.pattern_regex(&p.value, 0, None, false) {
                Ok(c) => langs.push(c.regex.map(|r| format!("\"{r}\""))),
                Err(e) => {
                    return Err(SchemaError::Pattern {
                        pointer: p.at.clone(),
                        detail: format!("{:?}: {e}", p.value),
                    })
                }
            }
        }
        let mut parts = Vec::new();
        for mask in 0u32..(1 << pats.len()) {
            let mut key = Some(base.clone());
            for (i, l) in langs.iter().enumerate() {
                let Some(k) = key.take() else { break };
                let inside = mask & (1 << i) != 0;
                key = match (inside, l) {
                    (true, None) => None,
                    (false, None) => Some(k),
                    (true, Some(l)) => {
                        self.combine(&k.text(), l, Op::And, "patternProperties", at)?
                    }
                    (false, Some(l)) => {
                        self.combine(&k.text(), l, Op::AndNot, "patternProperties", at)?
                    }
                };
            }
            let Some(key) = key else { continue };
            let value = if mask == 0 {
                match rest {
                    None => continue,
                    Some(Schema::Bool(true)) if n.additional.is_none() => {
                        Some(self.free_form(self.opts.extra_value_depth))
                    }
                    Some(s) => self.value(s, &[])?,
                }
            } else {
                let hits: Vec<Schema> = pats
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, (_, s))| s.clone())
                    .collect();
                self.value(&all_of(&n.at, hits), &[])?
            };
            if let Some(v) = value {
                parts.push(rx![key, &colon, v]);
            }
        }
        Ok(alt_all(parts))
    }
}

//! # JSON Schema fragments → pushdown automaton
//!
//! The schema front end ([`crate::schema::regex::compile_fragments`]) writes
//! one regex text per fragment, with call markers `(?-u:\xF8\xHH\xLL)` where
//! a recursive `$ref` is. Here each text becomes an NFA straight from the
//! subset parser ([`ByteDfa::fragment_nfa`]: the markers read as raw
//! bytes, the one-copy constructs for optional members and array items), or,
//! outside the subset, is written out and parsed by regex-syntax with
//! `utf8(false)` (the marker bytes are no UTF-8) into a syntax tree; the
//! set goes through [`Pda::build`], the same build as a GBNF grammar's
//! fragments. The
//! limits and refusals are worded in the schema's terms: the return stack
//! holds at most `SchemaOptions::max_stack_depth + 1` frames (the document and
//! `max_stack_depth` nested recursive references), an empty language is a
//! [`SchemaError::Empty`], and a fragment that can call into its own cycle
//! before reading a byte (left recursion, `{"anyOf": [{"$ref": "#"}, ...]}`)
//! is refused by name rather than left to grow stacks.

use super::regex::ANY_VALUE;
use super::{Pointer, SchemaError, SchemaOptions};
use crate::dfa::{ByteDfa, DfaConfig, DfaError, NEST_LIMIT};
use crate::pda::lazy::{LazyBody, LAZY_MARKER};
use crate::pda::{Body, BuildError, Limits, OwnedBody, Pda};

/// Why a schema's fragments became no pushdown automaton.
#[derive(Debug)]
pub(crate) enum PushdownError {
    /// Refused in the schema's terms (an empty language, a recursion too
    /// deep, left recursion, a fragment text too long).
    Schema(SchemaError),
    /// A fragment's text does not parse, or its automaton passes a limit.
    Dfa(DfaError),
}

impl From<SchemaError> for PushdownError {
    fn from(e: SchemaError) -> Self {
        PushdownError::Schema(e)
    }
}

impl From<DfaError> for PushdownError {
    fn from(e: DfaError) -> Self {
        PushdownError::Dfa(e)
    }
}

/// Stacks one configuration holds at most (as GBNF's default).
const MAX_STACKS: usize = 256;

/// A called fragment is determinized on demand when its text is longer than
/// this many bytes per state of [`DfaConfig::lazy_threshold`] (512 bytes at
/// the default 128 states; never when the threshold is off).
const LAZY_CALLEE_BYTES_PER_STATE: usize = 4;

/// Builds the pushdown automaton of a schema's fragments (`names[0]` is the
/// document; `bodies` are regex texts with call markers).
pub(crate) fn build(
    names: &[String],
    bodies: &[Option<String>],
    opts: &SchemaOptions,
    config: &DfaConfig,
) -> Result<Pda, PushdownError> {
    // With a lazy document (a copy of the document's text with short call
    // markers, parsed on its own) the document's own body is parsed only if
    // the lazy build refuses it.
    let lazy_doc = match bodies.first() {
        Some(Some(text)) => lazy_body(text, names.len(), opts, config)?,
        _ => None,
    };
    // Large called fragments (a Kubernetes schema's `PodSpec`: thousands
    // of states built whole, most never visited) are determinized on
    // demand too ([`crate::pda::lazy`]); the shared "any JSON value" fragment is
    // built whole (its frames' masks are shared by state number). With a
    // size limit below its default, called fragments are built whole,
    // so that one past the limit is refused at compile time (as
    // [`crate::dfa::LIMIT_CHECK_STATES`] does for one DFA; the compiler's
    // shared definitions fall back on it).
    let d = DfaConfig::default();
    let small_limit = config.dfa_size_limit < d.dfa_size_limit
        || config.determinize_size_limit < d.determinize_size_limit;
    let callee_min = match config.lazy_threshold() {
        Some(n) if !small_limit => n.saturating_mul(LAZY_CALLEE_BYTES_PER_STATE),
        _ => usize::MAX,
    };
    // A document calling more callees than there are one-byte markers is
    // determinized on demand as a long callee is (its three-byte markers,
    // its distances per room), not whole: a schema with a hundred shared
    // definitions had a document of half a million states built whole.
    let lazy_callees: Vec<bool> = names
        .iter()
        .zip(bodies)
        .enumerate()
        .map(|(i, (name, body))| {
            (i > 0 || lazy_doc.is_none())
                && name != ANY_VALUE
                && body.as_ref().is_some_and(|t| t.len() > callee_min)
        })
        .collect();
    let mut parsed = Vec::with_capacity(bodies.len());
    let mut size = 0;
    for (i, body) in bodies.iter().enumerate() {
        let Some(text) = body else {
            parsed.push(None);
            continue;
        };
        size += text.len();
        parsed.push(if i == 0 && lazy_doc.is_some() {
            None
        } else {
            Some(parse_fragment(text, opts, config)?)
        });
    }
    let limits = Limits {
        max_stack_depth: opts.max_stack_depth.saturating_add(1),
        max_stacks: MAX_STACKS,
        depth_knob: format!(
            "SchemaOptions::max_stack_depth ({}: the document and {} nested recursive $refs)",
            opts.max_stack_depth, opts.max_stack_depth
        ),
    };
    let mut built = Pda::build(
        names,
        &refs(&parsed),
        &limits,
        size,
        config,
        lazy_doc,
        &lazy_callees,
    );
    if let (Err(BuildError::NotLazy), Some(Some(text))) = (&built, bodies.first()) {
        parsed[0] = Some(parse_fragment(text, opts, config)?);
        built = Pda::build(
            names,
            &refs(&parsed),
            &limits,
            size,
            config,
            None,
            &lazy_callees,
        );
    }
    let mut pda = built.map_err(|e| match e {
        BuildError::Empty => SchemaError::Empty {
            pointer: Pointer::root(),
            detail: format!(
                " (recursive $ref nesting at most {} deep, the limit SchemaOptions::max_stack_depth)",
                opts.max_stack_depth
            ),
        }
        .into(),
        BuildError::Depth { need } => SchemaError::TooBig {
            what: "recursive $ref nesting of the shortest value".into(),
            pointer: Pointer::root(),
            size: need.saturating_sub(1) as u64,
            limit: opts.max_stack_depth as u64,
            knob: "max_stack_depth",
        }
        .into(),
        BuildError::Dfa(e) => e.into(),
        BuildError::NotLazy => unreachable_not_lazy(),
    })?;
    // The shared "any JSON value" fragment calls only itself: its frames'
    // masks depend on its text alone, so every schema over the vocabulary
    // shares them (keyed by the text, which fixes the DFA and its states).
    for (i, (name, body)) in names.iter().zip(bodies).enumerate() {
        let own = pda.frags[i]
            .calls
            .iter()
            .flatten()
            .all(|&(g, _)| g as usize == i);
        if let (true, Some(text), true) = (name == ANY_VALUE, body, own) {
            // The builder is part of the key: the direct NFA and the syntax
            // tree's number their DFA states differently.
            let how = match &parsed[i] {
                Some(OwnedBody::Nfa(_)) => "direct",
                _ if config.minimize => "minimized",
                _ => "hir",
            };
            pda.share[i] = Some(format!(
                "pda any value\0{}\0{how}\0{text}",
                opts.max_stack_depth
            ));
        }
    }
    if let Some(f) = pda.left_recursive() {
        return Err(SchemaError::UnsupportedValue {
            what: "$ref".into(),
            pointer: Pointer(pda.frags[f].name.clone()),
            detail: "a recursive $ref that can be entered again before any text is written \
                     (left recursion, as in {\"anyOf\": [{\"$ref\": \"#\"}, ...]})"
                .into(),
        }
        .into());
    }
    Ok(pda)
}

/// The document's text with one-byte call markers (`0xF5 + k` for its
/// `k`-th distinct callee) for the lazy build ([`crate::pda::lazy`]); `None`
/// when it calls more callees than there are such bytes.
fn lazy_body(
    text: &str,
    frags: usize,
    opts: &SchemaOptions,
    config: &DfaConfig,
) -> Result<Option<LazyBody>, PushdownError> {
    let mut out = text.to_string();
    let mut markers = Vec::new();
    for id in 1..frags {
        let Ok(id) = u16::try_from(id) else {
            return Ok(None);
        };
        let long = super::regex::marker(id);
        if !out.contains(&long) {
            continue;
        }
        let Some(b) = LAZY_MARKER.checked_add(markers.len() as u8) else {
            return Ok(None);
        };
        out = out.replace(&long, &format!("(?-u:\\x{b:02X})"));
        markers.push((b, id));
    }
    let body = parse_fragment(&out, opts, config)?;
    Ok(Some(LazyBody { body, markers }))
}

/// What [`Pda::build`] reads: the parsed texts, borrowed.
fn refs(parsed: &[Option<OwnedBody>]) -> Vec<Option<Body<'_>>> {
    parsed
        .iter()
        .map(|p| p.as_ref().map(OwnedBody::body))
        .collect()
}

/// A fragment text parsed: an NFA straight from the subset parser, or a
/// syntax tree from regex-syntax (the text outside the subset, its
/// one-copy constructs written out first).
fn parse_fragment(
    text: &str,
    opts: &SchemaOptions,
    config: &DfaConfig,
) -> Result<OwnedBody, PushdownError> {
    if let Some(nfa) = ByteDfa::fragment_nfa(text, config) {
        return Ok(OwnedBody::Nfa(nfa?));
    }
    let plain = crate::dfa::ordered::expand(text, opts.max_regex_len)
        .map_err(|_| super::regex::plain_too_long(opts))?;
    Ok(OwnedBody::Hir(parse_body(&plain)?))
}

/// A fragment body's syntax tree (bytes, not only UTF-8: call markers).
fn parse_body(text: &str) -> Result<regex_syntax::hir::Hir, PushdownError> {
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(text)
        .map_err(|e| {
            PushdownError::from(DfaError::Syntax {
                offset: e_offset(&e),
                message: e.to_string(),
            })
        })
}

/// The error for [`BuildError::NotLazy`] after a build without a lazy
/// document, which never returns it.
fn unreachable_not_lazy() -> PushdownError {
    PushdownError::from(DfaError::Build(
        "the document was refused by the lazy build twice".into(),
    ))
}

fn e_offset(e: &regex_syntax::Error) -> usize {
    match e {
        regex_syntax::Error::Parse(p) => p.span().start.offset,
        regex_syntax::Error::Translate(t) => t.span().start.offset,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("#/f{i}")).collect()
    }

    #[test]
    fn a_document_the_lazy_build_refuses_is_parsed_and_built_whole() {
        // A byte range that holds the call-marker bytes along with text,
        // reachable from the start: the lazy document refuses it (a marker
        // must be a transition of its own), and the document's own body,
        // left unparsed, is parsed for the whole build.
        let call = crate::schema::regex::marker(1);
        let bodies = vec![
            Some(format!(r"a(?-u:[\x00-\xFF]){call}")),
            Some("b".to_string()),
        ];
        let opts = SchemaOptions::default();
        let pda = build(&names(2), &bodies, &opts, &DfaConfig::default()).unwrap();
        assert!(!pda.frags[0].is_lazy());
        // Without the mixed range the same document is built lazily.
        let bodies = vec![Some(format!("a{call}")), Some("b".to_string())];
        let pda = build(&names(2), &bodies, &opts, &DfaConfig::default()).unwrap();
        assert!(pda.frags[0].is_lazy());
    }

    /// Whether fragment `f` of `pda`, started fresh, accepts `text`
    /// (text bytes only, no calls).
    fn accepts(pda: &mut Pda, f: usize, text: &[u8]) -> bool {
        let fr = &mut pda.frags[f];
        let mut s = fr.start;
        for &b in text {
            s = fr.next(s, b);
            if s == 0 {
                return false;
            }
        }
        fr.accepting[s as usize]
    }

    #[test]
    fn fragment_texts_read_directly_or_by_regex_syntax_alike() {
        let opts = SchemaOptions::default();
        let text = r"(?&,|a|b(?:x|y)?|c)";
        // In the subset: an NFA straight from the text; outside it (a
        // Perl class) or with minimization: written out for regex-syntax.
        let direct = DfaConfig::default();
        assert!(matches!(
            parse_fragment(text, &opts, &direct),
            Ok(OwnedBody::Nfa(_))
        ));
        assert!(matches!(
            parse_fragment(r"(?&,|\d|a)", &opts, &direct),
            Ok(OwnedBody::Hir(_))
        ));
        let minimized = DfaConfig {
            minimize: true,
            ..DfaConfig::default()
        };
        assert!(matches!(
            parse_fragment(text, &opts, &minimized),
            Ok(OwnedBody::Hir(_))
        ));
        let call = crate::schema::regex::marker(1);
        let bodies = vec![Some(format!("<{call}>")), Some(text.to_string())];
        let mut a = build(&names(2), &bodies, &opts, &direct).unwrap();
        let mut b = build(&names(2), &bodies, &opts, &minimized).unwrap();
        // Every text over the alphabet up to 5 bytes: the same verdict, and
        // the written-out language's verdict.
        let plain = crate::dfa::ordered::expand(text, usize::MAX).unwrap();
        let re = regex::bytes::Regex::new(&format!("^(?:{plain})$")).unwrap();
        let alphabet = b"abcxy,";
        let mut texts = vec![Vec::new()];
        let mut accepted = 0;
        for _ in 0..5 {
            let mut next = Vec::new();
            for t in &texts {
                for &c in alphabet {
                    let mut u: Vec<u8> = t.clone();
                    u.push(c);
                    next.push(u);
                }
            }
            for t in &next {
                let want = re.is_match(t);
                accepted += want as usize;
                assert_eq!(
                    accepts(&mut a, 1, t),
                    want,
                    "{:?}",
                    String::from_utf8_lossy(t)
                );
                assert_eq!(
                    accepts(&mut b, 1, t),
                    want,
                    "{:?}",
                    String::from_utf8_lossy(t)
                );
            }
            texts = next;
        }
        assert!(
            accepted > 10,
            "the sample holds accepted texts ({accepted})"
        );
    }
}

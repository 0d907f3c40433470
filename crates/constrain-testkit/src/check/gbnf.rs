//! The `gbnf_compile` fuzz target's case and checks: a small random GBNF
//! grammar (made by [`random_gbnf`] from bytes, so proptest and the fuzzer
//! share one generator), texts, a small vocabulary and walk choices.
//!
//! [`check_gbnf_case`] compiles the grammar through the [`Compiler`]
//! (unrolled to `max_depth`) and checks, against the Earley recognizer of
//! [`crate::earley`] (which knows nothing of inlining, rewriting or depth):
//!
//! * **soundness**: every text the matcher accepts (walked byte by byte,
//!   then EOS) the recognizer accepts;
//! * **completeness** for grammars without recursion: the matcher accepts
//!   every text the recognizer accepts (texts sampled from the grammar and
//!   random ones);
//! * the invariants of [`super::check_reachable_states`] (every allowed
//!   token keeps a completion reachable, EOS exactly where the text is
//!   complete) over the index;
//! * a [`super::check_walk`] whose finished output the recognizer accepts.

use super::*;
use crate::earley::{sample, Earley};
use constrain::grammar::gbnf::{Gbnf, GbnfOptions};
use constrain::{CompileError, Compiler, CompilerConfig, Source};
use rand::{rngs::StdRng, SeedableRng};

/// A `gbnf_compile` fuzz case. Saved as JSON under
/// `fuzz/regressions/gbnf_compile/`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GbnfCase {
    /// The grammar text.
    pub grammar: String,
    /// Texts to compare the matcher and the recognizer on.
    pub texts: Vec<String>,
    /// Extra text tokens (every single byte is a token too).
    pub tokens: Vec<Vec<u8>>,
    /// Recursion unrolling depth.
    pub max_depth: usize,
    /// Seed of the texts sampled from the grammar.
    pub seed: u64,
    /// Walk choices.
    pub choices: Vec<u8>,
}

/// What [`check_gbnf_case`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GbnfOutcome {
    /// Refused with a typed error (a parse error, left recursion, an empty
    /// language, a limit).
    Refused(String),
    /// Checked: how many texts each side accepted.
    Checked {
        /// Whether a rule of the grammar reaches itself ([`is_recursive`]).
        recursive: bool,
        /// Texts the matcher accepted.
        matcher_accepted: usize,
        /// Texts the Earley recognizer accepted.
        recognizer_accepted: usize,
    },
}

/// Characters the generator and the texts draw from.
pub const GBNF_POOL: [char; 7] = ['a', 'b', 'c', '-', 'é', '\n', '"'];

/// A small GBNF grammar from bytes (every input gives a grammar; most parse).
pub fn random_gbnf(bytes: &[u8]) -> String {
    let mut r = Bytes { b: bytes, i: 0 };
    let n = 1 + r.next() as usize % 3;
    let names = ["root", "r-1", "r2"];
    let mut out = String::new();
    if r.next() % 4 == 0 {
        out.push_str("# a comment\n");
    }
    for name in names.iter().take(n) {
        out.push_str(name);
        out.push_str(" ::= ");
        let alts = 1 + r.next() as usize % 3;
        for a in 0..alts {
            if a > 0 {
                out.push_str(if r.next() % 3 == 0 { " |\n  " } else { " | " });
            }
            expr(&mut r, &names[..n], 0, &mut out);
        }
        out.push('\n');
    }
    out
}

struct Bytes<'a> {
    b: &'a [u8],
    i: usize,
}

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let v = self.b.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        v
    }
}

fn lit_char(r: &mut Bytes, out: &mut String) {
    match r.next() % 10 {
        0 => out.push_str("\\x61"),
        1 => out.push_str("\\n"),
        2 => out.push_str("\\u00e9"),
        3 => out.push_str("\\\""),
        4 => out.push('é'),
        5 => out.push('-'),
        6 | 7 => out.push('a'),
        8 => out.push('b'),
        _ => out.push('c'),
    }
}

fn expr(r: &mut Bytes, names: &[&str], depth: usize, out: &mut String) {
    let k = if depth >= 3 {
        r.next() % 4
    } else {
        r.next() % 10
    };
    match k {
        0 => {
            out.push('"');
            for _ in 0..1 + r.next() % 3 {
                lit_char(r, out);
            }
            out.push('"');
        }
        1 => {
            out.push('[');
            if r.next() % 3 == 0 {
                out.push('^');
            }
            match r.next() % 4 {
                0 => out.push_str("a-c"),
                1 => out.push_str("b\\n"),
                2 => out.push_str("\\x61-b-"),
                _ => out.push_str("é\""),
            }
            out.push(']');
        }
        2 => out.push_str(names[r.next() as usize % names.len()]),
        3 => out.push_str(if r.next() % 4 == 0 { "." } else { "\"b\"" }),
        4 | 5 => {
            for i in 0..2 + r.next() % 2 {
                if i > 0 {
                    out.push(' ');
                }
                expr(r, names, depth + 1, out);
            }
        }
        6 => {
            out.push('(');
            for i in 0..2 + r.next() % 2 {
                if i > 0 {
                    out.push_str(if r.next() % 4 == 0 { "\n | " } else { " | " });
                }
                expr(r, names, depth + 1, out);
            }
            out.push(')');
        }
        7 | 8 => {
            out.push('(');
            expr(r, names, depth + 1, out);
            out.push(')');
            let (m, n) = (r.next() % 3, r.next() % 3);
            match r.next() % 6 {
                0 => out.push('*'),
                1 => out.push('+'),
                2 => out.push('?'),
                3 => out.push_str(&format!("{{{m}}}")),
                4 => out.push_str(&format!("{{{m},}}")),
                _ => out.push_str(&format!("{{{},{}}}", m.min(n), m.max(n))),
            }
        }
        _ => out.push_str("\"\""),
    }
}

/// Whether any rule of `g` reaches itself through references.
pub fn is_recursive(g: &Gbnf) -> bool {
    let idx = |n: &str| g.rules.iter().position(|r| r.name == n);
    let edges: Vec<Vec<usize>> = g
        .rules
        .iter()
        .map(|r| {
            let mut v = Vec::new();
            r.body.for_each_ref(&mut |n, _| v.extend(idx(n)));
            v
        })
        .collect();
    (0..edges.len()).any(|s| {
        let mut seen = vec![false; edges.len()];
        let mut stack = edges[s].clone();
        while let Some(x) = stack.pop() {
            if x == s {
                return true;
            }
            if !std::mem::replace(&mut seen[x], true) {
                stack.extend(&edges[x]);
            }
        }
        false
    })
}

/// Every check of the module docs, for one case.
pub fn check_gbnf_case(case: &GbnfCase) -> Result<GbnfOutcome, Violation> {
    let g = match Gbnf::parse("case", &case.grammar) {
        Ok(g) => g,
        Err(e) => return Ok(GbnfOutcome::Refused(e.to_string())),
    };
    let options = GbnfOptions::default()
        .max_depth(case.max_depth.min(4))
        .max_nodes(1 << 14)
        .max_stack_depth(64)
        .max_stacks(64);
    // Recursion beyond the immediate kind compiles to the pushdown engine,
    // which is exact (up to its limits, which the index reports).
    let pushdown = matches!(
        constrain::grammar::gbnf::lower::fragments(&g, &options),
        Ok(Some(_))
    );
    let exact = pushdown || !is_recursive(&g);
    let mut toks: Vec<(TokenId, Vec<u8>)> =
        (0..=255u8).map(|b| (TokenId(b as u32), vec![b])).collect();
    for t in case.tokens.iter().take(32) {
        if !t.is_empty() && t.len() <= 6 {
            toks.push((TokenId(toks.len() as u32), t.clone()));
        }
    }
    let eos = TokenId(toks.len() as u32);
    let vocab = match Vocabulary::new(toks, [eos], eos.0 as usize + 1) {
        Ok(v) => Arc::new(v),
        Err(e) => return Ok(GbnfOutcome::Refused(e.to_string())),
    };
    let config = CompilerConfig::default()
        .dfa(fuzz_dfa_config())
        .index(IndexConfig::default().threads(1).max_states(20_000))
        .cache_entries(0);
    let compiler = Compiler::new(vocab.clone(), config);
    let source = Source::Gbnf {
        grammar: g.clone(),
        options: options.clone(),
    };
    let earley = Earley::new(&g);
    let compiled = match compiler.compile(&source) {
        Ok(c) => c,
        Err(CompileError::Gbnf(constrain::grammar::gbnf::GbnfError::EmptyLanguage { .. })) => {
            // Within the depth nothing is derivable: the recognizer must not
            // accept any of the texts derivable within that depth.
            let mut rng = StdRng::seed_from_u64(case.seed);
            for _ in 0..8 {
                if let Some(t) = sample(&g, &mut rng, options.max_depth, &GBNF_POOL) {
                    if exact && earley.accepts(t.as_bytes()) {
                        return fail(
                            "the compiler says the language is empty, the recognizer accepts",
                            t.as_bytes(),
                        );
                    }
                }
            }
            return Ok(GbnfOutcome::Refused("empty language".into()));
        }
        Err(e) => return Ok(GbnfOutcome::Refused(e.to_string())),
    };
    let recursive = is_recursive(&g);
    // The texts: the case's, and some sampled from the grammar.
    let mut texts: Vec<String> = case.texts.iter().take(16).cloned().collect();
    let mut rng = StdRng::seed_from_u64(case.seed);
    for _ in 0..12 {
        texts.extend(sample(&g, &mut rng, 6, &GBNF_POOL));
    }
    let (mut m_acc, mut r_acc) = (0, 0);
    for t in &texts {
        let mut m = compiled.matcher();
        let walked = t.bytes().all(|b| m.accept_token(TokenId(b as u32)));
        let matcher = walked && m.is_accepting();
        let recognizer = earley.accepts(t.as_bytes());
        m_acc += matcher as usize;
        r_acc += recognizer as usize;
        if matcher && !recognizer {
            return fail(
                "the matcher accepts a text the Earley recognizer rejects",
                t.as_bytes(),
            );
        }
        let limited = compiled.index().lazy_limit_error().is_some();
        if exact && !limited && recognizer && !matcher {
            return fail(
                "the matcher rejects a text the recognizer accepts (non-recursive grammar, \
                 or the pushdown engine within its limits)",
                t.as_bytes(),
            );
        }
        if matcher && !m.accept_token(eos) {
            return fail("EOS refused after an accepted text", t.as_bytes());
        }
    }
    if pushdown {
        check_pushdown_walk(&compiled, &earley, &case.choices, eos)?;
        return Ok(GbnfOutcome::Checked {
            recursive,
            matcher_accepted: m_acc,
            recognizer_accepted: r_acc,
        });
    }
    // The index's own invariants against an oracle over the same automaton.
    let hir = match constrain::grammar::gbnf::lower(&g, &options) {
        Ok(h) => h,
        Err(e) => return fail(format!("compiled, but lowering again fails: {e}"), b""),
    };
    let dfa = match ByteDfa::from_hir(&hir, case.grammar.len(), &fuzz_dfa_config()) {
        Ok(d) => d,
        Err(e) => return fail(format!("compiled, but the eager DFA fails: {e}"), b""),
    };
    if let Some(oracle) = Oracle::new(&dfa, 20_000) {
        let index = compiled.index();
        let reach = check_reachable_states(index, &oracle, 2_000)?;
        if let Some(p) = reach.token_dead_end {
            return fail("a token-level dead end", p.as_bytes());
        }
        let accepts = |t: &[u8]| earley.accepts(t);
        check_walk(
            index,
            &oracle,
            &case.choices,
            &WalkOptions::default(),
            &accepts,
        )?;
    }
    Ok(GbnfOutcome::Checked {
        recursive,
        matcher_accepted: m_acc,
        recognizer_accepted: r_acc,
    })
}

/// A walk of a pushdown matcher steered by `choices` (each byte picks an
/// allowed token), then finished by budget descent (a token that lowers
/// [`Matcher::tokens_to_accept`] by one, which exists at every state that is
/// not a dead end): the finished text must be accepted by the recognizer,
/// and EOS allowed exactly at its end.
pub fn check_pushdown_walk(
    compiled: &constrain::Compiled,
    earley: &Earley,
    choices: &[u8],
    eos: TokenId,
) -> Result<(), Violation> {
    let vocab = compiled.vocab().clone();
    let mut m = compiled.matcher();
    let mut text = Vec::new();
    for &c in choices.iter().take(64) {
        let allowed: Vec<TokenId> = m.allowed().iter().filter(|&t| t != eos).collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[c as usize % allowed.len()];
        if !m.accept_token(t) {
            return fail("a token of the mask was refused", &text);
        }
        text.extend_from_slice(vocab.token_bytes(t).unwrap_or(b""));
        let (acc, want) = (m.is_accepting(), earley.accepts(&text));
        if acc && !want || want && !acc && compiled.index().lazy_limit_error().is_none() {
            return fail("EOS allowed where the recognizer disagrees", &text);
        }
    }
    for _ in 0..4096 {
        if m.is_accepting() {
            break;
        }
        let Some(need) = m.tokens_to_accept() else {
            return fail("a configuration with no known completion", &text);
        };
        let Some(t) = m
            .allowed()
            .iter()
            .find(|&t| t != eos && m.tokens_to_accept_after(t) == Some(need.saturating_sub(1)))
        else {
            return fail("a dead end: no token brings acceptance closer", &text);
        };
        if !m.accept_token(t) {
            return fail("a token of the mask was refused", &text);
        }
        text.extend_from_slice(vocab.token_bytes(t).unwrap_or(b""));
    }
    if !m.is_accepting() || !earley.accepts(&text) {
        return fail("the finished text is not in the grammar", &text);
    }
    if !m.accept_token(eos) {
        return fail("EOS refused after a finished text", &text);
    }
    Ok(())
}

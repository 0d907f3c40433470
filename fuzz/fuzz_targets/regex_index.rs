//! `regex_index`: an arbitrary regex (built from a small `arbitrary` AST, so
//! nearly every input is a valid pattern) over a small arbitrary vocabulary.
//!
//! Invariants (all in `constrain_testkit::check::check_regex_index_case`, which
//! `tests/fuzz_regressions.rs` replays): the sparse determinizer's DFA and
//! regex-automata's accept the same language; eager and lazy indexes agree; every
//! mask of every reachable state equals the oracle's (every allowed token
//! keeps acceptance reachable, EOS exactly in accepting states, nothing else);
//! no token-level dead end; budget bounds are sound; a walk of allowed tokens
//! ending in EOS yields bytes the `regex` crate matches in full.
//!
//! Bounds: AST depth 5, at most 4 children per node, repetition counts up to
//! 4, at most 48 tokens of at most 6 bytes, 64 walk-choice bytes, small DFA
//! limits. On a violation the panic message carries the case as JSON: save
//! it under `fuzz/regressions/regex_index/NAME.json`.
#![no_main]

use arbitrary::Arbitrary;
use constrain_testkit::check::{check_regex_index_case, CaseOutcome, RegexIndexCase};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Sym {
    A,
    B,
    Z,
    Zero,
    Nine,
    Quote,
    Space,
    Comma,
    Brace,
    Backslash,
    EAcute,
    Han,
    Emoji,
    Newline,
}

impl Sym {
    fn ch(self) -> char {
        match self {
            Sym::A => 'a',
            Sym::B => 'b',
            Sym::Z => 'Z',
            Sym::Zero => '0',
            Sym::Nine => '9',
            Sym::Quote => '"',
            Sym::Space => ' ',
            Sym::Comma => ',',
            Sym::Brace => '{',
            Sym::Backslash => '\\',
            Sym::EAcute => 'é',
            Sym::Han => '中',
            Sym::Emoji => '😀',
            Sym::Newline => '\n',
        }
    }
}

const ALL: [Sym; 14] = [
    Sym::A,
    Sym::B,
    Sym::Z,
    Sym::Zero,
    Sym::Nine,
    Sym::Quote,
    Sym::Space,
    Sym::Comma,
    Sym::Brace,
    Sym::Backslash,
    Sym::EAcute,
    Sym::Han,
    Sym::Emoji,
    Sym::Newline,
];

#[derive(Arbitrary, Debug)]
enum Node {
    Empty,
    Lit(Sym),
    Class { syms: Vec<Sym>, negated: bool },
    Range(Sym, Sym),
    Dot { newline: bool },
    Digit,
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Star(Box<Node>),
    Plus(Box<Node>),
    Opt(Box<Node>),
    Rep(Box<Node>, u8, u8),
}

fn esc(c: char) -> String {
    if "\\.+*?()|[]{}^$#&-~".contains(c) {
        format!("\\{c}")
    } else if c == '\n' {
        "\\n".into()
    } else {
        c.to_string()
    }
}

fn render(n: &Node, depth: usize, out: &mut String) {
    if depth > 5 {
        out.push('a');
        return;
    }
    let group = |inner: &Node, out: &mut String| {
        out.push_str("(?:");
        render(inner, depth + 1, out);
        out.push(')');
    };
    match n {
        Node::Empty => out.push_str("(?:)"),
        Node::Lit(s) => out.push_str(&esc(s.ch())),
        Node::Class { syms, negated } => {
            out.push('[');
            if *negated {
                out.push('^');
            }
            if syms.is_empty() {
                out.push('a');
            }
            for s in syms.iter().take(4) {
                out.push_str(&esc(s.ch()));
            }
            out.push(']');
        }
        Node::Range(a, b) => {
            let (a, b) = (a.ch().min(b.ch()), a.ch().max(b.ch()));
            out.push_str(&format!("[{}-{}]", esc(a), esc(b)));
        }
        Node::Dot { newline } => out.push_str(if *newline { "(?s:.)" } else { "." }),
        Node::Digit => out.push_str("[0-9]"),
        Node::Concat(v) => {
            for c in v.iter().take(4) {
                group(c, out);
            }
        }
        Node::Alt(v) => {
            out.push_str("(?:");
            for (i, c) in v.iter().take(4).enumerate() {
                if i > 0 {
                    out.push('|');
                }
                render(c, depth + 1, out);
            }
            out.push(')');
        }
        Node::Star(c) => {
            group(c, out);
            out.push('*');
        }
        Node::Plus(c) => {
            group(c, out);
            out.push('+');
        }
        Node::Opt(c) => {
            group(c, out);
            out.push('?');
        }
        Node::Rep(c, lo, hi) => {
            let (lo, hi) = ((*lo % 5).min(*hi % 5), (*lo % 5).max(*hi % 5));
            group(c, out);
            out.push_str(&format!("{{{lo},{hi}}}"));
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    root: Node,
    case_insensitive: bool,
    tokens: Vec<Vec<u8>>,
    singles: u64,
    all_single_bytes: bool,
    eos_count: u8,
    extra_width: u8,
    choices: Vec<u8>,
}

fn case_of(input: &Input) -> RegexIndexCase {
    let mut pattern = String::new();
    if input.case_insensitive {
        pattern.push_str("(?i)");
    }
    render(&input.root, 0, &mut pattern);
    // The byte pool the tokens draw from: every symbol's UTF-8, so multi-byte
    // characters get split across tokens.
    let pool: Vec<u8> = ALL
        .iter()
        .flat_map(|s| s.ch().to_string().into_bytes())
        .collect();
    let mut tokens: Vec<Vec<u8>> = input
        .tokens
        .iter()
        .take(48)
        .map(|t| {
            t.iter()
                .take(6)
                .map(|&b| pool[b as usize % pool.len()])
                .collect()
        })
        .collect();
    for (i, &b) in pool.iter().enumerate() {
        if input.singles >> i & 1 == 1 {
            tokens.push(vec![b]);
        }
    }
    RegexIndexCase {
        pattern,
        tokens,
        all_single_bytes: input.all_single_bytes,
        eos_count: 1 + input.eos_count % 2,
        extra_width: input.extra_width % 4,
        choices: input.choices.iter().take(64).copied().collect(),
    }
}

fuzz_target!(|input: Input| {
    let case = case_of(&input);
    let re = regex::bytes::RegexBuilder::new(&format!("^(?:{})$", case.pattern))
        .size_limit(64 << 20)
        .build();
    let full_match = |text: &[u8]| match &re {
        Ok(re) => re.is_match(text),
        Err(_) => false,
    };
    match check_regex_index_case(&case, &full_match, false) {
        Ok(outcome) => stats(&outcome),
        Err(v) => panic!(
            "{v}\ncase: {}",
            serde_json::to_string(&case).unwrap_or_default()
        ),
    }
});

/// With `CONSTRAIN_FUZZ_STATS` set, prints how many cases ran the checks, were
/// refused, or hit a token-level dead end (a violation now), every 4096 runs.
fn stats(outcome: &CaseOutcome) {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static RUNS: [AtomicUsize; 3] = [
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ];
    let k = match outcome {
        CaseOutcome::Checked {
            token_dead_end: None,
            ..
        } => 0,
        CaseOutcome::Checked { .. } => 1,
        CaseOutcome::Refused(_) => 2,
    };
    RUNS[k].fetch_add(1, Relaxed);
    let total: usize = RUNS.iter().map(|r| r.load(Relaxed)).sum();
    if total % 4096 == 0 && std::env::var_os("CONSTRAIN_FUZZ_STATS").is_some() {
        eprintln!(
            "regex_index: {} checked, {} checked with a token-level dead end, {} refused",
            RUNS[0].load(Relaxed),
            RUNS[1].load(Relaxed),
            RUNS[2].load(Relaxed)
        );
    }
}

//! The pushdown engine: GBNF recursion is exact. Checked on a
//! hand-checkable vocabulary and on the real Qwen vocabulary against the
//! testkit's Earley recognizer (which knows nothing of fragments, stacks or
//! automata): deep nesting, agreement on random and sampled texts, no dead
//! ends under adversarial token choices, rollback, the stack limits, and
//! the `max_tokens` budget with open frames.

use constrain::grammar::gbnf::{Gbnf, GbnfError, GbnfOptions};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Matcher, Source};
use constrain_testkit::budget::byte_accepts as accepts_bytes;
use constrain_testkit::budget::bytes_and;
use constrain_testkit::earley::{sample, Earley};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;

/// ids 0..=255 are the single bytes, then a few multi-byte tokens that
/// cross rule boundaries; EOS is the last id.
fn tiny_vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "((", "))", ")))", "[[", "]]", "]]]", "],", "},", "\"}", "\":", "{\"", "x)", "(x", "true]",
        "1,", "12", "null}", ",\"", "+(", ")*", "a+", "()",
    ])
}

fn id(v: &Vocabulary, bytes: &[u8]) -> TokenId {
    v.text_tokens()
        .find(|(_, b)| *b == bytes)
        .map(|(t, _)| t)
        .unwrap()
}

fn compile(vocab: &Arc<Vocabulary>, text: &str, opts: GbnfOptions) -> Arc<Compiled> {
    let c = Compiler::new(vocab.clone(), CompilerConfig::default());
    c.compile(&Source::Gbnf {
        grammar: Gbnf::parse("t", text).unwrap(),
        options: opts,
    })
    .unwrap()
}

const PARENS: &str = "root ::= p\np ::= \"(\" p \")\" | \"x\"\n";
const DYCK: &str = "root ::= s\ns ::= ( \"(\" s \")\" | \"[\" s \"]\" )*\n";
const LIST: &str = "root ::= item\nitem ::= \"a\" | \"(\" item ( \"+\" item )* \")\"\n";

fn json_gbnf() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/json.gbnf")).unwrap()
}

fn arith_gbnf() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/grammars/arithmetic.gbnf"
    ))
    .unwrap()
}

#[test]
fn nesting_fifty_deep_is_accepted_and_unbalanced_is_not() {
    let (v, eos) = tiny_vocab();
    let c = compile(&v, PARENS, GbnfOptions::default());
    for depth in [0, 1, 5, 50] {
        let t = format!("{}x{}", "(".repeat(depth), ")".repeat(depth));
        assert!(accepts_bytes(&c, t.as_bytes()), "depth {depth}");
    }
    for bad in ["(x", "x)", "((x)", "(x))", "()", ""] {
        assert!(!accepts_bytes(&c, bad.as_bytes()), "{bad:?}");
    }
    // After "(((", a mask offers "(" and "x" and never ")" or EOS.
    let mut m = c.matcher();
    for _ in 0..3 {
        assert!(m.accept_token(TokenId(b'(' as u32)));
    }
    assert!(m.is_allowed(TokenId(b'(' as u32)) && m.is_allowed(TokenId(b'x' as u32)));
    assert!(!m.is_allowed(TokenId(b')' as u32)) && !m.is_allowed(eos));
    // "x)" closes one frame inside one token; ")))" three.
    let xclose = id(&v, b"x)");
    let close3 = id(&v, b")))");
    assert!(m.accept_token(xclose));
    assert!(m.accept_token(TokenId(b')' as u32)));
    assert!(!m.is_allowed(close3), "only one frame is left open");
    assert!(m.accept_token(TokenId(b')' as u32)) && m.is_accepting());
    assert!(m.accept_token(eos) && m.is_terminated());

    let json = compile(&v, &json_gbnf(), GbnfOptions::default());
    let arr = format!("{}1{}", "[".repeat(50), "]".repeat(50));
    assert!(accepts_bytes(&json, arr.as_bytes()));
    let obj = format!("{}1{}", "{\"a\":".repeat(50), "}".repeat(50));
    assert!(accepts_bytes(&json, obj.as_bytes()));
    let mixed = format!("{}null{}", "[{\"k\": ".repeat(50), "}]".repeat(50));
    assert!(accepts_bytes(&json, mixed.as_bytes()));
    assert!(!accepts_bytes(
        &json,
        format!("{}1{}", "[".repeat(50), "]".repeat(49)).as_bytes()
    ));
    assert!(!accepts_bytes(&json, b"[1}"));
}

#[test]
fn a_regular_grammar_keeps_the_flat_path() {
    let (v, _) = tiny_vocab();
    let c = compile(
        &v,
        "root ::= \"a\" b\nb ::= [0-9]+\n",
        GbnfOptions::default(),
    );
    assert!(!c.is_lazy() && c.index().is_complete());
    // Immediate right recursion is rewritten exactly and stays flat too.
    let c = compile(
        &v,
        "root ::= x\nx ::= \"a\" x | \"b\"\n",
        GbnfOptions::default(),
    );
    assert!(c.index().is_complete());
    assert!(accepts_bytes(&c, b"aaab"));
}

/// Random texts over the grammar's alphabet and texts sampled from it.
fn texts(g: &Gbnf, alphabet: &[u8], seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let pool = ['a', 'x', '1', '"', ' ', 'é'];
    let mut out = Vec::new();
    for _ in 0..n {
        let len = rng.random_range(0..14);
        out.push(
            (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect(),
        );
        if let Some(t) = sample(g, &mut rng, 12, &pool) {
            out.push(t.into_bytes());
        }
    }
    out
}

#[test]
fn matcher_agrees_with_the_earley_recognizer() {
    let (v, _) = tiny_vocab();
    let cases: Vec<(String, &[u8])> = vec![
        (PARENS.to_string(), b"()x"),
        (DYCK.to_string(), b"()[]"),
        (LIST.to_string(), b"a(+)"),
        (arith_gbnf(), b"1(+-* )"),
        (json_gbnf(), b"[]{}\",:1 tn"),
    ];
    for (i, (text, alphabet)) in cases.iter().enumerate() {
        let g = Gbnf::parse("t", text).unwrap();
        let earley = Earley::new(&g);
        let c = compile(&v, text, GbnfOptions::default());
        let (mut yes, mut no) = (0, 0);
        for t in texts(&g, alphabet, i as u64, 400) {
            let want = earley.accepts(&t);
            assert_eq!(
                accepts_bytes(&c, &t),
                want,
                "grammar {i}: {:?}",
                String::from_utf8_lossy(&t)
            );
            if want {
                yes += 1
            } else {
                no += 1
            }
        }
        assert!(
            yes > 20 && no > 20,
            "grammar {i}: {yes} accepted, {no} rejected"
        );
    }
}

/// Random walk: adversarial choices (the deepest-opening token when there
/// is one), then completion by budget descent; the finished text must be
/// accepted by the recognizer. A dead end would leave descent stuck.
fn walk_and_finish(c: &Compiled, earley: &Earley, rng: &mut StdRng, steps: usize, opener: u8) {
    let v = c.vocab().clone();
    let mut m = c.matcher();
    let mut text = Vec::new();
    for _ in 0..steps {
        let allowed: Vec<TokenId> = m.allowed().iter().filter(|&t| !v.is_eos(t)).collect();
        if allowed.is_empty() {
            break;
        }
        let open = TokenId(opener as u32);
        let t = if rng.random_bool(0.4) && m.is_allowed(open) {
            open
        } else {
            allowed[rng.random_range(0..allowed.len())]
        };
        assert!(m.accept_token(t));
        text.extend_from_slice(v.token_bytes(t).unwrap());
        assert!(
            m.tokens_to_accept().is_some(),
            "no completion known after {text:?}"
        );
    }
    let mut guard = 0;
    while !m.is_accepting() {
        let need = m.tokens_to_accept().expect("a completion");
        let t = m
            .allowed()
            .iter()
            .find(|&t| m.tokens_to_accept_after(t) == Some(need - 1))
            .unwrap_or_else(|| panic!("dead end after {:?}", String::from_utf8_lossy(&text)));
        assert!(m.accept_token(t));
        text.extend_from_slice(v.token_bytes(t).unwrap_or(b""));
        guard += 1;
        assert!(guard < 10_000);
    }
    assert!(
        earley.accepts(&text),
        "finished text rejected: {:?}",
        String::from_utf8_lossy(&text)
    );
}

#[test]
fn no_dead_ends_on_a_tiny_vocabulary() {
    let (v, _) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(7);
    for (text, opener) in [
        (PARENS.to_string(), b'('),
        (DYCK.to_string(), b'['),
        (LIST.to_string(), b'('),
        (arith_gbnf(), b'('),
        (json_gbnf(), b'['),
    ] {
        let g = Gbnf::parse("t", &text).unwrap();
        let earley = Earley::new(&g);
        let c = compile(&v, &text, GbnfOptions::default());
        for _ in 0..30 {
            walk_and_finish(&c, &earley, &mut rng, 40, opener);
        }
    }
}

#[test]
fn no_dead_ends_over_the_qwen_vocabulary() {
    let Some(v) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: no tokenizer.json in ~/.cache/constrain (scripts/fetch-assets)");
        return;
    };
    let mut rng = StdRng::seed_from_u64(11);
    for (text, opener) in [(json_gbnf(), b'['), (PARENS.to_string(), b'(')] {
        let g = Gbnf::parse("t", &text).unwrap();
        let earley = Earley::new(&g);
        let c = compile(&v, &text, GbnfOptions::default());
        for _ in 0..6 {
            walk_and_finish(&c, &earley, &mut rng, 30, opener);
        }
    }
}

#[test]
fn rollback_restores_the_stack() {
    let (v, _) = tiny_vocab();
    let c = compile(&v, &json_gbnf(), GbnfOptions::default());
    let toks: Vec<TokenId> = ["[[", "{\"", "k", "\":", "[", "1,", "12", "]", "}"]
        .iter()
        .map(|t| id(&v, t.as_bytes()))
        .collect();
    let mut m = c.matcher();
    let mut masks = vec![m.allowed().clone()];
    for &t in &toks {
        assert!(m.accept_token(t), "{t:?}");
        masks.push(m.allowed().clone());
    }
    let words = constrain::bitmask_words(v.logits_width());
    let (mut a, mut b) = (vec![0u32; words], vec![0u32; words]);
    for n in [1, 4, 9] {
        m.rollback(n).unwrap();
        assert_eq!(m.allowed(), &masks[toks.len() - n]);
        for &t in &toks[toks.len() - n..] {
            assert!(m.accept_token(t));
        }
        assert_eq!(m.allowed(), &masks[toks.len()]);
    }
    // A second matcher gives the same bitmask at the same point.
    let mut other: Matcher = c.matcher();
    assert!(other.accept_tokens(&toks).is_ok());
    m.fill_bitmask(&mut a).unwrap();
    other.fill_bitmask(&mut b).unwrap();
    assert_eq!(a, b);
}

#[test]
fn the_stack_limit_is_a_named_knob() {
    let (v, _) = tiny_vocab();
    let opts = GbnfOptions::default().max_stack_depth(5);
    let c = compile(&v, PARENS, opts.clone());
    // root is frame 1, so `p` may nest four deep.
    let ok = format!("{}x{}", "(".repeat(3), ")".repeat(3));
    assert!(accepts_bytes(&c, ok.as_bytes()));
    let mut m = c.matcher();
    let mut opened = 0;
    while m.accept_token(TokenId(b'(' as u32)) {
        opened += 1;
        assert!(opened < 10);
    }
    assert_eq!(opened, 3, "the mask stops offering '(' at the limit");
    assert!(
        m.is_allowed(TokenId(b'x' as u32)),
        "and still offers the way out"
    );
    let hit = c.index().lazy_limit_error().expect("the limit was reached");
    assert!(
        matches!(&hit, constrain::index::LimitHit::StackDepth { knob } if knob.contains("max_stack_depth")),
        "{hit:?}"
    );
    let msg = hit.to_string();
    assert!(msg.contains("GbnfOptions::max_stack_depth"), "{msg}");

    // A grammar whose every text nests deeper than the limit.
    let c = Compiler::new(v.clone(), CompilerConfig::default());
    let deep = "root ::= p\np ::= \"(\" q \")\"\nq ::= \"[\" p \"]\" | \"x\"\n";
    let e = c
        .compile(&Source::Gbnf {
            grammar: Gbnf::parse("t", deep).unwrap(),
            options: GbnfOptions::default().max_stack_depth(2),
        })
        .unwrap_err();
    assert!(
        matches!(
            e,
            CompileError::Gbnf(GbnfError::StackDepth { limit: 2, .. })
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("GbnfOptions::max_stack_depth"),
        "{e}"
    );
}

#[test]
fn an_unproductive_rule_never_opens_a_dead_end() {
    let (v, _) = tiny_vocab();
    // `bad` derives no finite text: "(" can only lead into it after "[".
    let text = "root ::= p\np ::= \"(\" p \")\" | \"x\" | \"[\" bad\nbad ::= \"<\" bad \">\"\n";
    let c = compile(&v, text, GbnfOptions::default());
    let m = c.matcher();
    assert!(!m.is_allowed(TokenId(b'[' as u32)));
    assert!(m.is_allowed(TokenId(b'(' as u32)));
}

#[test]
fn budget_with_open_frames_never_cuts_a_structure() {
    let (v, eos) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(3);
    for (text, opener) in [(PARENS.to_string(), b'('), (json_gbnf(), b'[')] {
        let g = Gbnf::parse("t", &text).unwrap();
        let earley = Earley::new(&g);
        let c = compile(&v, &text, GbnfOptions::default());
        let start_need = c.matcher().tokens_to_accept().unwrap() as usize;
        for max_tokens in start_need + 1..start_need + 25 {
            for _ in 0..4 {
                let mut m = c.matcher();
                let mut out = Vec::new();
                let mut ended = false;
                for used in 0..max_tokens {
                    let remaining = max_tokens - used;
                    let fits: Vec<TokenId> = m
                        .allowed()
                        .iter()
                        .filter(|&t| m.fits(t, remaining))
                        .collect();
                    assert!(!fits.is_empty(), "no token fits with {remaining} left");
                    // Adversarial: open a frame whenever the budget allows.
                    let open = TokenId(opener as u32);
                    let t = if fits.contains(&open) && rng.random_bool(0.7) {
                        open
                    } else {
                        fits[rng.random_range(0..fits.len())]
                    };
                    assert!(m.accept_token(t));
                    if t == eos {
                        ended = true;
                        break;
                    }
                    out.extend_from_slice(v.token_bytes(t).unwrap());
                }
                assert!(
                    ended || m.is_accepting(),
                    "cut at {max_tokens} tokens: {:?}",
                    String::from_utf8_lossy(&out)
                );
                assert!(earley.accepts(&out), "{:?}", String::from_utf8_lossy(&out));
            }
        }
    }
}

#[test]
fn forced_bytes_stop_where_there_is_a_choice() {
    let (v, _) = tiny_vocab();
    let text = "root ::= p\np ::= \"<<\" p \">>\" | \"x\"\n";
    let c = compile(&v, text, GbnfOptions::default());
    let mut m = c.matcher();
    assert!(m.forced_bytes().is_empty(), "'<' or 'x'");
    assert!(m.accept_token(TokenId(b'<' as u32)));
    assert_eq!(m.forced_bytes(), b"<");
    assert!(m.accept_token(TokenId(b'<' as u32)));
    assert!(m.accept_token(TokenId(b'x' as u32)));
    // Only the closing bytes of the one open frame are forced.
    assert_eq!(m.forced_bytes(), b">>");
}

#[test]
fn masks_agree_with_token_walks_deep_in_the_stack() {
    // Masks of deep configurations come from a walk over their top frames
    // only (shared between depths); each must equal the token-by-token walk
    // of the real configuration.
    let (v, eos) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(5);
    for (text, opener) in [
        (json_gbnf(), b'['),
        (PARENS.to_string(), b'('),
        (DYCK.to_string(), b'['),
        (LIST.to_string(), b'('),
    ] {
        let c = compile(&v, &text, GbnfOptions::default());
        for _ in 0..12 {
            let mut m = c.matcher();
            for step in 0..60 {
                let mask = m.allowed().clone();
                for t in (0..v.logits_width() as u32).map(TokenId) {
                    assert_eq!(
                        mask.contains(t),
                        m.is_allowed(t),
                        "token {t:?} at step {step}"
                    );
                }
                let allowed: Vec<TokenId> = mask.iter().filter(|&t| t != eos).collect();
                if allowed.is_empty() {
                    break;
                }
                let open = TokenId(opener as u32);
                let t = if step < 30 && m.is_allowed(open) && rng.random_bool(0.6) {
                    open
                } else {
                    allowed[rng.random_range(0..allowed.len())]
                };
                assert!(m.accept_token(t));
            }
        }
    }
}

/// A grammar whose shortest way out of `a` needs a frame more (`<y>`
/// calls `c`) than its long way out (`longlonglong`): at the depth limit
/// only the long way is left, and the budget must count it.
const ROOMY: &str = "root ::= a\na ::= \"(\" a \")\" | \"<\" c \">\" | \"longlonglongx\"\nc ::= \"{\" c \"}\" | \"y\"\n";

/// Generation with a tight `max_tokens` under adversarial choices (open a
/// frame whenever the budget allows, else the token that fits and is
/// farthest from done): every run ends complete and recognized.
fn tight_budget_runs(
    c: &Compiled,
    earley: &Earley,
    rng: &mut StdRng,
    opener: u8,
    max_tokens: usize,
) {
    let v = c.vocab().clone();
    let mut m = c.matcher();
    let mut out = Vec::new();
    let mut ended = false;
    for used in 0..max_tokens {
        let remaining = max_tokens - used;
        assert!(
            m.tokens_to_accept().is_some(),
            "budget unknown after {:?}",
            String::from_utf8_lossy(&out)
        );
        let fits: Vec<TokenId> = m
            .allowed()
            .iter()
            .filter(|&t| m.fits(t, remaining))
            .collect();
        assert!(
            !fits.is_empty(),
            "no token fits with {remaining} left after {:?}",
            String::from_utf8_lossy(&out)
        );
        let open = TokenId(opener as u32);
        let t = if fits.contains(&open) && rng.random_bool(0.8) {
            open
        } else if rng.random_bool(0.5) {
            // The token that leaves the most to do.
            *fits
                .iter()
                .max_by_key(|&&t| m.tokens_to_accept_after(t).unwrap_or(0))
                .unwrap()
        } else {
            fits[rng.random_range(0..fits.len())]
        };
        assert!(m.accept_token(t));
        if v.is_eos(t) {
            ended = true;
            break;
        }
        out.extend_from_slice(v.token_bytes(t).unwrap());
    }
    assert!(
        ended || m.is_accepting(),
        "cut at {max_tokens} tokens: {:?}",
        String::from_utf8_lossy(&out)
    );
    assert!(earley.accepts(&out), "{:?}", String::from_utf8_lossy(&out));
}

#[test]
fn budget_at_the_stack_limit_never_cuts_a_structure() {
    let (v, _) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(17);
    for (text, opener) in [
        (ROOMY.to_string(), b'('),
        (PARENS.to_string(), b'('),
        (json_gbnf(), b'['),
        (LIST.to_string(), b'('),
    ] {
        let g = Gbnf::parse("t", &text).unwrap();
        let earley = Earley::new(&g);
        for depth in [3usize, 4, 6, 9] {
            let opts = GbnfOptions::default().max_stack_depth(depth);
            let c = compile(&v, &text, opts);
            let start_need = c.matcher().tokens_to_accept().unwrap() as usize;
            for max_tokens in start_need + 1..start_need + 30 {
                for _ in 0..3 {
                    tight_budget_runs(&c, &earley, &mut rng, opener, max_tokens);
                }
            }
        }
    }
}

#[test]
fn the_budget_at_the_stack_limit_counts_the_long_way_out() {
    let (v, _) = tiny_vocab();
    let opts = GbnfOptions::default().max_stack_depth(4);
    let c = compile(&v, ROOMY, opts);
    let mut m = c.matcher();
    // root is frame 1; `a` frames 2, 3, 4: `<y>` needs a fifth.
    assert!(m.accept_token(TokenId(b'(' as u32)));
    assert!(m.accept_token(TokenId(b'(' as u32)));
    assert!(!m.is_allowed(TokenId(b'(' as u32)) && !m.is_allowed(TokenId(b'<' as u32)));
    // "longlonglongx))": 15 bytes, 14 tokens here ("x)" is one).
    assert_eq!(c.index().bytes_to_accept(m.state()), 15);
    assert_eq!(m.tokens_to_accept(), Some(14));
    // Taking the long way keeps the count exact, token by token.
    for (k, b) in b"longlonglong".iter().enumerate() {
        assert!(m.accept_token(TokenId(*b as u32)));
        assert_eq!(m.tokens_to_accept(), Some(13 - k as u32));
    }
}

//! Special tokens in Lark grammars at the token level: `<name>` and
//! `<[id]>` allow exactly that token (never its text spelled in ordinary
//! tokens), over a byte-level vocabulary with added tokens and over the
//! real Qwen tokenizer (skipped with a message without it); names and ids
//! that are no special, non-stop token of the vocabulary are refused with
//! their line and column.

use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source, TokenId, Vocabulary};
use std::sync::Arc;

mod tags_util;
use tags_util::vocab_with_specials;

fn compile(v: &Arc<Vocabulary>, grammar: &str) -> Result<Arc<Compiled>, CompileError> {
    Compiler::new(v.clone(), CompilerConfig::default()).compile(&Source::lark(grammar)?)
}

fn byte(c: char) -> TokenId {
    TokenId(c as u32)
}

/// Walks `tokens`; whether all were allowed and the output is complete.
fn walk(c: &Compiled, tokens: &[TokenId]) -> (bool, bool) {
    let mut m = c.matcher();
    let ok = tokens.iter().all(|&t| m.accept_token(t));
    (ok, ok && m.is_accepting())
}

fn text(s: &str) -> Vec<TokenId> {
    s.chars().map(byte).collect()
}

#[test]
fn a_special_token_allows_that_token_and_not_its_text() {
    let (v, [eos, call, end_call, think, _]) = vocab_with_specials();
    let c = compile(&v, "start: \"a\" <tool_call> \"b\"").unwrap();
    let mut m = c.matcher();
    assert!(m.accept_token(byte('a')));
    let allowed: Vec<TokenId> = m.allowed().iter().collect();
    assert_eq!(allowed, vec![call], "only the token, not `<`");
    assert!(!m.allows(byte('<')) && !m.allows(think) && !m.allows(eos));
    assert!(m.accept_token(call) && m.accept_token(byte('b')) && m.is_accepting());
    // The text `<tool_call>` spelled in bytes is refused.
    let mut spelled = text("a<tool_call>b");
    assert!(!walk(&c, &spelled).0);
    spelled = vec![byte('a'), call, byte('b')];
    assert_eq!(walk(&c, &spelled), (true, true));
    // By id, and in a range: the same tokens.
    let g = format!("start: <[{}]> /[0-9]+/ <[{}]>", call.0, end_call.0);
    let c = compile(&v, &g).unwrap();
    assert_eq!(
        walk(&c, &[call, byte('4'), byte('2'), end_call]),
        (true, true)
    );
    assert!(!walk(&c, &[call, end_call]).0, "the digits are required");
    assert!(!walk(&c, &text("<tool_call>1</tool_call>")).0);
    let g = format!("start: (<[{}-{}]> \"x\")+", call.0, end_call.0);
    let c = compile(&v, &g).unwrap();
    assert_eq!(
        walk(&c, &[call, byte('x'), end_call, byte('x')]),
        (true, true)
    );
    assert!(!walk(&c, &[think]).0);
    // Recursion (the pushdown engine) carries the tokens the same way.
    let c = compile(&v, "start: x\nx: \"(\" x \")\" | <tool_call>").unwrap();
    assert!(c.stats().fragments > 0, "compiled on the pushdown engine");
    assert_eq!(
        walk(&c, &[byte('('), byte('('), call, byte(')'), byte(')')]),
        (true, true)
    );
    assert!(!walk(&c, &text("(<tool_call>)")).0);
}

#[test]
fn text_lexemes_stop_where_a_special_token_comes() {
    let (v, [_, call, end_call, think, end_think]) = vocab_with_specials();
    // Any text, then the token: greedy lexing cannot run past it.
    let c = compile(
        &v,
        "start: <think> /(.|\\n)*/ </think> /[a-z ]*/ call*\ncall: <tool_call> %json {\"type\": \"integer\"} </tool_call>\n",
    )
    .unwrap();
    let mut t = vec![think];
    t.extend(text("hm <think> </think>"));
    t.push(end_think);
    t.extend(text("ok "));
    t.extend([call, byte('7'), end_call]);
    assert_eq!(walk(&c, &t), (true, true));
    // `%ignore` stands between a text lexeme and a token as between two
    // lexemes.
    let c = compile(&v, "start: \"a\" <tool_call>\n%ignore \" \"\n").unwrap();
    assert_eq!(walk(&c, &[byte('a'), byte(' '), call]), (true, true));
}

#[test]
fn names_and_ids_that_are_no_special_token_are_refused_with_their_place() {
    let (v, [eos, _, _, _, _]) = vocab_with_specials();
    for (g, what, (line, column)) in [
        (
            "start: \"a\"\n  | <|nope|>",
            "special token `<|nope|>`",
            (2, 5),
        ),
        (
            "start: <|endoftext|>",
            "the stop token `<|endoftext|>`",
            (1, 8),
        ),
        ("start: \"a\" <[65]>", "token 65 in `<[65]>`", (1, 12)),
        (
            &format!("start: <[{}-{}]>", eos.0, eos.0 + 1) as &str,
            "the stop token `<|endoftext|>`",
            (1, 8),
        ),
        ("start: <[257-9999]>", "past the vocabulary", (1, 8)),
        ("start: <[^257]>", "token 0 in `<[^257]>`", (1, 8)),
        ("start: <[*]>", "the wildcard token `<[*]>`", (1, 8)),
    ] {
        let e = match compile(&v, g) {
            Ok(_) => panic!("{g:?} compiled"),
            Err(e @ CompileError::Lark(_)) => e.to_string(),
            Err(e) => panic!("{g:?}: not a Lark error: {e}"),
        };
        assert!(e.contains(what), "{g:?}: {e}");
        assert!(
            e.starts_with(&format!("line {line}, column {column}:")),
            "{g:?}: {e}"
        );
    }
}

#[test]
fn equal_texts_share_a_compile_and_others_do_not() {
    let (v, [_, call, end_call, _, _]) = vocab_with_specials();
    let compiler = Compiler::new(v.clone(), CompilerConfig::default());
    let a = compiler
        .compile(&Source::lark("start: <tool_call>").unwrap())
        .unwrap();
    let b = compiler
        .compile(&Source::lark("start: </tool_call>").unwrap())
        .unwrap();
    let a2 = compiler
        .compile(&Source::lark("start: <tool_call>").unwrap())
        .unwrap();
    assert!(Arc::ptr_eq(&a, &a2));
    assert_eq!(walk(&a, &[call]), (true, true));
    assert_eq!(walk(&b, &[end_call]), (true, true));
    assert!(!walk(&b, &[call]).0);
}

/// The Qwen tokenizer (`$CONSTRAIN_HOME/tokenizer.json`), if present.
fn qwen() -> Option<Arc<Vocabulary>> {
    let home = std::env::var_os("CONSTRAIN_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/constrain")
        });
    match Vocabulary::from_tokenizer_json_file(home.join("tokenizer.json")) {
        Ok(v) => Some(Arc::new(v)),
        Err(_) => {
            eprintln!("skipping: no tokenizer at {}", home.display());
            None
        }
    }
}

#[test]
fn qwen_special_tokens_by_name_and_id() {
    let Some(v) = qwen() else { return };
    let id = |t: &str| {
        v.symbols()
            .find(|(_, x, _)| *x == t)
            .unwrap_or_else(|| panic!("{t} is no symbol"))
            .0
    };
    let (im_start, call, end_call) = (id("<|im_start|>"), id("<tool_call>"), id("</tool_call>"));
    assert_eq!((im_start.0, call.0, end_call.0), (151644, 151657, 151658));
    let tok = |s: &str| {
        v.text_tokens()
            .find(|(_, b)| *b == s.as_bytes())
            .unwrap_or_else(|| panic!("{s:?} is no token"))
            .0
    };
    let c = compile(&v, "start: \"a\" <|im_start|> \"b\"").unwrap();
    let mut m = c.matcher();
    assert!(m.accept_token(tok("a")));
    let allowed: Vec<TokenId> = m.allowed().iter().collect();
    assert_eq!(allowed, vec![im_start], "the token only, never its text");
    assert!(m.accept_token(im_start) && m.accept_token(tok("b")) && m.is_accepting());

    let c = compile(&v, "start: <[151657]> /[0-9]+/ <[151658]>").unwrap();
    let mut m = c.matcher();
    assert_eq!(m.allowed().iter().collect::<Vec<_>>(), vec![call]);
    assert!(!m.allows(tok("<")));
    assert!(m.accept_token(call) && m.accept_token(tok("1")));
    assert!(m.allows(end_call) && !m.allows(tok("</")));
    assert!(m.accept_token(end_call) && m.is_accepting());

    // Stop tokens and ordinary tokens are refused by name.
    for (g, what) in [
        ("start: \"a\" <|endoftext|>", "stop token"),
        ("start: <[64]>", "token 64"),
        ("start: <|nope|>", "special token `<|nope|>`"),
    ] {
        let Err(e) = compile(&v, g) else {
            panic!("{g}: compiled")
        };
        let e = e.to_string();
        assert!(
            e.contains(what) && e.starts_with("line 1, column "),
            "{g}: {e}"
        );
    }
}

#[test]
fn grammar_lists_carry_special_tokens_into_named_grammars() {
    let (v, [_, call, end_call, _, _]) = vocab_with_specials();
    let list = |call_grammar: &str| {
        serde_json::json!({"grammars": [
            {"name": "main", "lark_grammar": "start: /[a-z ]*/ @call*\n"},
            {"name": "call", "lark_grammar": call_grammar},
            {"name": "args", "json_schema": {"type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"], "additionalProperties": false}},
        ]})
        .to_string()
    };
    let compiler = Compiler::new(v.clone(), CompilerConfig::default());
    let src = Source::llguidance(&list("start: <tool_call> @args </tool_call>\n")).unwrap();
    let c = compiler.compile(&src).unwrap();
    let mut t = text("hi ");
    for _ in 0..2 {
        t.push(call);
        t.extend(text("{\"n\":12}"));
        t.push(end_call);
    }
    assert_eq!(walk(&c, &t), (true, true));
    assert!(
        !walk(&c, &[call, byte('{'), byte('}')]).0,
        "the schema holds"
    );
    // Source::lark takes the list too, and the cache tells lists apart.
    let same = compiler
        .compile(&Source::lark(&list("start: <tool_call> @args </tool_call>\n")).unwrap())
        .unwrap();
    assert!(Arc::ptr_eq(&c, &same));
    let other = compiler
        .compile(&Source::llguidance(&list("start: <tool_call> @args\n")).unwrap())
        .unwrap();
    assert!(!Arc::ptr_eq(&c, &other));
    // A `.json` grammar file is the same list.
    let path = std::env::temp_dir().join(format!("lark-list-{}.json", std::process::id()));
    std::fs::write(&path, list("start: <tool_call> @args </tool_call>\n")).unwrap();
    let from_file = compiler
        .compile(&Source::grammar_file(&path).unwrap())
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(walk(&from_file, &t), (true, true));
    // A token the vocabulary lacks, named in a grammar of the list.
    let Err(e) = compiler.compile(&Source::llguidance(&list("start: \"X\" <|nope|>\n")).unwrap())
    else {
        panic!("compiled")
    };
    let e = e.to_string();
    assert!(
        e.starts_with("line 1, column 12:") && e.ends_with("(in grammar `call`)"),
        "{e}"
    );
}

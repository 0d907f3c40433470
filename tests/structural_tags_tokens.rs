//! Structural tags at the token level: the thinking budget in tokens
//! (`any_text.max_tokens`), the token-level formats over special tokens,
//! and the call options the server uses (bare Qwen calls, calls last).

use constrain::tags::StructuralTag;
use constrain::tools::{self, Reasoning, ToolChoice, ToolFormat};
use constrain::{Compiled, Compiler, CompilerConfig, Source, TokenId, Vocabulary};
use serde_json::{json, Value};

mod tags_util;
use tags_util::*;

/// The ids of `texts` in `v`'s text tokens.
fn text_ids<const N: usize>(v: &Vocabulary, texts: [&str; N]) -> [TokenId; N] {
    texts.map(|t| {
        v.text_tokens()
            .find(|(_, b)| *b == t.as_bytes())
            .unwrap_or_else(|| panic!("{t:?} is not a token"))
            .0
    })
}

#[test]
fn a_thinking_budget_closes_the_thinking_after_so_many_tokens() {
    let (v, [eos, call, _, think, end_think]) = vocab_with_specials();
    let budgeted = |reasoning, n| {
        let tag = tools::structural_tag_with_budget(
            ToolFormat::Qwen3,
            &weather_tools(),
            &ToolChoice::Auto,
            true,
            reasoning,
            Some(n),
        )
        .unwrap();
        Compiler::new(v.clone(), CompilerConfig::default())
            .compile(&Source::StructuralTag {
                tag,
                options: StructuralTag::schema_options(),
            })
            .unwrap()
    };
    let byte = |c: char| TokenId(c as u32);
    // The prompt opened <think>: three tokens of thinking, then only what
    // closes it: the `</think>` token, or its text from `<`.
    let c = budgeted(Reasoning::Enabled, 3);
    let mut m = c.matcher();
    for ch in "hmm".chars() {
        assert!(m.allows(byte(ch)));
        m.advance(byte(ch)).unwrap();
    }
    let allowed: Vec<TokenId> = m.allowed().iter().collect();
    assert_eq!(allowed, vec![byte('<'), end_think]);
    assert!(!m.accept_token(byte('x')), "a fourth token of thinking");
    let mut row = vec![0u32; constrain::bitmask_words(v.logits_width())];
    m.fill_bitmask(&mut row).unwrap();
    let bits: Vec<u32> = (0..v.logits_width() as u32)
        .filter(|&t| row[t as usize / 32] >> (t % 32) & 1 == 1)
        .collect();
    assert_eq!(
        bits,
        vec![b'<' as u32, end_think.0],
        "the bitmask is the mask"
    );
    // Once begun, the close only goes forward.
    m.advance(byte('<')).unwrap();
    assert_eq!(m.allowed().iter().collect::<Vec<_>>(), vec![byte('/')]);
    m.advance(byte('/')).unwrap();
    assert_eq!(m.allowed().iter().collect::<Vec<_>>(), vec![byte('t')]);
    assert_eq!(m.validate_tokens(&[byte('t'), byte('h'), byte('x')]), 2);
    for ch in "think>".chars() {
        m.advance(byte(ch)).unwrap();
    }
    // Closed: the answer is free again.
    for ch in "\n\nSunny, 20 degrees.".chars() {
        assert!(m.accept_token(byte(ch)), "{ch:?}");
    }
    assert!(m.allows(eos) && m.allows(call));
    // Rolled back into the thinking, the budget is where it was.
    m.rollback(m.num_tokens() - 2).unwrap();
    assert!(m.allows(byte('x')), "two tokens of three spent");
    m.advance(byte('m')).unwrap();
    assert_eq!(
        m.allowed().iter().collect::<Vec<_>>(),
        vec![byte('<'), end_think]
    );
    m.reset();
    assert!(m.allows(byte('x')));
    // Bytes taken without a token spend nothing.
    assert!(m.accept_bytes(b"a long thought"));
    assert!(m.allows(byte('x')));

    // In `auto`, the budget starts once `<think>` (token or text) is read;
    // an answer without thinking has no budget.
    let c = budgeted(Reasoning::Auto, 2);
    let mut m = c.matcher();
    m.advance(think).unwrap();
    m.advance(byte('a')).unwrap();
    m.advance(byte('b')).unwrap();
    assert_eq!(
        m.allowed().iter().collect::<Vec<_>>(),
        vec![byte('<'), end_think]
    );
    m.advance(end_think).unwrap();
    let mut m = c.matcher();
    for ch in "<think>".chars() {
        m.advance(byte(ch)).unwrap();
    }
    m.advance(byte('a')).unwrap();
    assert!(m.allows(byte('b')));
    m.advance(byte('b')).unwrap();
    assert!(!m.allows(byte('c')) && m.allows(end_think));
    let mut m = c.matcher();
    for ch in "No thinking needed here".chars() {
        assert!(m.accept_token(byte(ch)));
    }
    // A budget of zero: the thinking is empty.
    let c = budgeted(Reasoning::Enabled, 0);
    assert_eq!(
        c.matcher().allowed().iter().collect::<Vec<_>>(),
        vec![byte('<'), end_think]
    );
    // A budget anywhere but the tag that opens the output is refused.
    let inner = json!({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "A:"},
        {"type": "tag", "begin": "<think>", "end": "</think>",
         "content": {"type": "any_text", "max_tokens": 5}}]}});
    let e = refusal(inner);
    assert_eq!(
        e.pointer().map(|p| p.0.as_str()),
        Some("/format/elements/1/content/max_tokens"),
        "{e}"
    );
}

#[test]
fn a_thinking_budget_holds_against_logits_that_never_close_it() {
    let Some(v) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: the Qwen tokenizer is not fetched (scripts/fetch-assets)");
        return;
    };
    let end_think = v
        .symbols()
        .find(|(_, text, _)| *text == "</think>")
        .map(|(id, _, _)| id)
        .expect("</think> is a Qwen added token");
    let [the, open, slash] = text_ids(&v, [" the", "<", "</"]);
    for budget in [0u32, 1, 7, 64] {
        let tag = tools::structural_tag_with_budget(
            ToolFormat::Qwen3,
            &weather_tools(),
            &ToolChoice::Required,
            true,
            Reasoning::Enabled,
            Some(budget),
        )
        .unwrap();
        let c = Compiler::new(v.clone(), CompilerConfig::default())
            .compile(&Source::StructuralTag {
                tag,
                options: StructuralTag::schema_options(),
            })
            .unwrap();
        // Scripted logits: " the" whenever it is allowed, else the longest
        // allowed token that is not the closing token; `</think>` last.
        let mut m = c.matcher();
        let mut thinking = 0;
        loop {
            assert!(!m.allowed().is_empty());
            if m.allows(the) {
                m.advance(the).unwrap();
                thinking += 1;
                continue;
            }
            // Spent: `</think>` is never blocked, and nothing but the
            // close is allowed (its text from `<` or `</`).
            assert_eq!(thinking, budget, "the budget is spent exactly");
            assert!(m.allows(end_think));
            let rest: Vec<TokenId> = m.allowed().iter().collect();
            for t in &rest {
                let b = v.spelling(*t).unwrap();
                assert!(
                    *t == end_think || b"</think>".starts_with(b),
                    "{:?} does not close the thinking",
                    v.describe(*t)
                );
            }
            assert!(rest.contains(&open) && rest.contains(&slash));
            m.advance(end_think).unwrap();
            break;
        }
        // After the thinking: a call is required, and one completes it.
        assert!(!m.is_accepting());
        let call = "\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>";
        assert!(m.accept_bytes(call.as_bytes()) && m.is_accepting());
    }
}

/// A walk of text and special tokens: each `Err(id)` a token, each
/// `Ok(text)` its bytes one by one; whether it ends accepted.
fn walk(c: &Compiled, steps: &[Result<&str, TokenId>]) -> bool {
    let mut m = c.matcher();
    steps.iter().all(|s| match s {
        Ok(text) => text.bytes().all(|b| m.accept_token(TokenId(b as u32))),
        Err(t) => m.accept_token(*t),
    }) && m.is_accepting()
}

#[test]
fn token_level_formats_match_special_tokens_by_id() {
    let (v, [eos, call, end_call, think, end_think]) = vocab_with_specials();
    let c = |fmt: Value| compile(&v, fmt).unwrap_or_else(|e| panic!("{e}"));
    // `token`: the token, by text or id; never its text spelled in bytes.
    for t in [json!("<tool_call>"), json!(call.0)] {
        let k = c(json!({"type": "token", "token": t}));
        assert!(walk(&k, &[Err(call)]));
        assert!(!walk(&k, &[Ok("<tool_call>")]));
        assert!(!walk(&k, &[Err(end_call)]));
    }
    // `any_tokens`: text and special tokens but the excluded ones (a stop
    // token may be named: it is never inside the output anyway).
    let k = c(json!({"type": "any_tokens", "exclude_tokens": ["<think>", eos.0, "<|endoftext|>"]}));
    assert!(walk(&k, &[]));
    assert!(walk(&k, &[Ok("a"), Err(call), Ok("b"), Err(end_think)]));
    assert!(!walk(&k, &[Ok("a"), Err(think)]));
    assert!(walk(&k, &[Ok("<think>")]), "the text is not the token");
    // `token_triggered_tags`: free tokens until the trigger token, which
    // opens its tag; the tag's end token is kept out of its content.
    let tag = json!({"type": "tag", "begin": {"type": "token", "token": "<tool_call>"},
        "content": {"type": "any_tokens"}, "end": {"type": "token", "token": end_call.0}});
    let trig = |alo: bool, saf: bool| {
        c(
            json!({"type": "token_triggered_tags", "trigger_tokens": ["<tool_call>"],
            "tags": [tag], "exclude_tokens": ["<think>"], "at_least_one": alo, "stop_after_first": saf}),
        )
    };
    let one = [Err(call), Ok("x"), Err(end_think), Err(end_call)];
    let texts: [Vec<Result<&str, TokenId>>; 6] = [
        vec![],
        vec![Ok("hi <tool_call>")],
        one.to_vec(),
        [&[Ok("hi")][..], &one].concat(),
        [&one[..], &[Ok("bye")]].concat(),
        [&one[..], &one].concat(),
    ];
    // As triggered_tags' four modes (see above), on tokens.
    for ((alo, saf), want) in [
        ((false, false), [true, true, true, true, true, true]),
        ((true, false), [false, false, true, false, true, true]),
        ((false, true), [true, true, true, true, false, false]),
        ((true, true), [false, false, true, false, false, false]),
    ] {
        let k = trig(alo, saf);
        let got = texts.clone().map(|t| walk(&k, &t));
        assert_eq!(got, want, "at_least_one {alo}, stop_after_first {saf}");
        assert!(!walk(&k, &[Ok("a"), Err(think)]), "an excluded token");
    }
    // `token_dispatch`: each rule's format after its token.
    let k = c(
        json!({"type": "token_dispatch", "rules": [["<think>", {"type": "const_string", "value": "X"}]],
        "loop": false}),
    );
    assert!(walk(&k, &[Ok("a"), Err(think), Ok("X")]));
    assert!(!walk(&k, &[Ok("a"), Err(think), Ok("Y")]));
    assert!(
        !walk(&k, &[Err(think), Ok("X"), Err(think), Ok("X")]),
        "no loop"
    );
    // Refused by pointer: an ordinary token, a stop token where a token
    // must stand, a name no token has, exclude_token, a token begin among
    // string triggers.
    for (fmt, pointer) in [
        (json!({"type": "token", "token": 65}), "/format/token"),
        (
            json!({"type": "token", "token": "<|endoftext|>"}),
            "/format/token",
        ),
        (json!({"type": "token", "token": "<nope>"}), "/format/token"),
        (
            json!({"type": "any_tokens", "exclude_tokens": ["<think>", "a"]}),
            "/format/exclude_tokens/1",
        ),
        (
            json!({"type": "exclude_token", "exclude_tokens": [1]}),
            "/format",
        ),
        (
            json!({"type": "triggered_tags", "triggers": ["<t"], "tags": [tag]}),
            "/format/tags/0/begin",
        ),
        (
            json!({"type": "token_triggered_tags", "trigger_tokens": ["<think>"], "tags": [tag]}),
            "/format/tags/0/begin",
        ),
    ] {
        let e = refusal_in(v.clone(), json!({"type": "structural_tag", "format": fmt}));
        assert_eq!(
            e.pointer().map(|p| p.0.as_str()),
            Some(pointer),
            "{fmt}: {e}"
        );
    }
}

#[test]
fn calls_last_and_bare_qwen_calls() {
    let (v, _) = vocab();
    let opts = tools::TagOptions::default()
        .bare_calls(true)
        .calls_last(true);
    let c = |choice: ToolChoice| {
        let tag = tools::structural_tag_with(ToolFormat::Qwen3, &weather_tools(), &choice, &opts)
            .unwrap();
        Compiler::new(v.clone(), CompilerConfig::default())
            .compile(&Source::StructuralTag {
                tag,
                options: StructuralTag::schema_options(),
            })
            .unwrap()
    };
    let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    let bare = "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}";
    let auto = c(ToolChoice::Auto);
    for (text, want) in [
        ("Let me look.", true),
        (call, true),
        (bare, true),
        (&format!("Sure. {bare}"), true),
        (&format!("{call}\n{bare}"), true),
        (&format!("{call} and more text"), false),
        (&format!("{bare}{call}"), false),
        ("{\"name\": \"nope\"", false),
    ] {
        assert_eq!(accepts(&auto, text), want, "{text:?}");
    }
    let required = c(ToolChoice::Required);
    assert!(accepts(&required, bare) && accepts(&required, &format!("{bare}\n{call}")));
    assert!(!accepts(&required, "text") && !accepts(&required, &format!("{call}\nok")));
}

//! Vocabularies beyond Qwen, checked against the `tokenizers` crate's own
//! encoding: Llama 3, DeepSeek V3 and gpt-oss (byte-level BPE), Llama 2 and
//! Gemma 3 (SentencePiece with byte fallback), as fetched by
//! `scripts/fetch-assets --tokenizers` into `$CONSTRAIN_HOME/tokenizers/NAME/`.
//!
//! For MaskBench instances (python `json.dumps` text, as the MaskBench runner
//! makes it): the concatenated bytes of the ids `tokenizers` gives for the text
//! equal the text (with one leading space when the tokenizer prepends one to a
//! text encoded alone: Llama 2); the output tokenization
//! (`TextTokenizer::encode`) reproduces the text exactly; and a schema
//! compiled over the vocabulary accepts that token sequence, every token being
//! in the mask, then allows a stop token (schemas the compiler narrows, with a
//! warning, are left out of that step: the narrowing rejects some valid
//! instances whatever the vocabulary). Absent tokenizers or corpora skip
//! with a message.

use constrain::schema::SchemaOptions;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use constrain::{Compiler, CompilerConfig, Source};
use constrain_testkit::assets::{constrain_home, corpora, qwen_tokenizer, qwen_vocab};
use constrain_testkit::maskbench::{load_file, python_dumps};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::{Mutex, OnceLock};

fn tokenizer_dir(name: &str) -> Option<PathBuf> {
    let d = constrain_home().join("tokenizers").join(name);
    if d.join("tokenizer.json").exists() {
        Some(d)
    } else {
        eprintln!(
            "skipping: {name} tokenizer not found at {} (run scripts/fetch-assets --tokenizers)",
            d.display()
        );
        None
    }
}

fn stop_names(v: &Vocabulary, tk: &TextTokenizer) -> Vec<String> {
    let mut out: Vec<String> = v
        .eos()
        .iter()
        .map(|&id| tk.id_to_token(id).unwrap_or_default())
        .collect();
    out.sort();
    out
}

/// Every `step`-th MaskBench file, its valid instances as text.
fn sample(step: usize, max_files: usize) -> Option<Vec<(serde_json::Value, Vec<String>)>> {
    let dir = corpora()?.join("maskbench-dev");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for p in files.iter().step_by(step).take(max_files) {
        let Ok(cases) = load_file(p) else { continue };
        for c in cases {
            let texts: Vec<String> = c
                .instances
                .iter()
                .filter(|i| i.valid)
                .map(|i| python_dumps(&i.data))
                .collect();
            if !texts.is_empty() {
                out.push((c.schema.clone(), texts));
            }
        }
    }
    Some(out)
}

/// Whether the schema compiled over Qwen's vocabulary accepts `text`
/// (cached per text); `None` (with a message) when Qwen's tokenizer is absent.
fn qwen_accepts(schema: &serde_json::Value, text: &str) -> Option<bool> {
    static CACHE: Mutex<Option<HashMap<String, bool>>> = Mutex::new(None);
    if let Some(&r) = CACHE
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .get(text)
    {
        return Some(r);
    }
    let (vocab, tk) = (qwen_vocab()?, qwen_tokenizer()?);
    static COMPILER: OnceLock<Compiler> = OnceLock::new();
    let compiler = COMPILER.get_or_init(|| Compiler::new(vocab.clone(), CompilerConfig::default()));
    let src = Source::json_schema(schema.clone()).with_schema_options(SchemaOptions::compliant());
    let ok = compiler.compile(&src).is_ok_and(|c| {
        let mut m = c.matcher();
        tk.encode(text)
            .unwrap()
            .iter()
            .all(|&t| m.is_allowed(t) && m.advance(t).is_ok())
            && vocab.eos().iter().any(|&e| m.is_allowed(e))
    });
    CACHE
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(text.to_string(), ok);
    Some(ok)
}

fn check(name: &str, expect_stops: &[&str], expect_prefix: bool) {
    let Some(dir) = tokenizer_dir(name) else {
        return;
    };
    let Some(cases) = sample(97, 60) else { return };
    let path = dir.join("tokenizer.json");
    let vocab = Arc::new(Vocabulary::from_tokenizer_json_file(&path).expect("vocabulary loads"));
    let tk = TextTokenizer::from_file(&path).expect("tokenizer loads");
    let raw = tokenizers::Tokenizer::from_file(&path).expect("tokenizers loads");
    assert_eq!(
        vocab.adds_prefix_space(),
        expect_prefix,
        "{name}: prefix rule"
    );
    let stops = stop_names(&vocab, &tk);
    for s in expect_stops {
        assert!(
            stops.iter().any(|x| x == s),
            "{name}: stop set {stops:?} lacks {s}"
        );
    }
    assert_eq!(
        vocab.num_ids(),
        raw.get_vocab_size(true),
        "{name}: id count"
    );

    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    let (mut texts, mut compiled, mut core_rejects) = (0, 0, 0);
    for (schema, instances) in &cases {
        for text in instances {
            // The tokenizers crate's own encoding, as the file says.
            let ids: Vec<u32> = raw.encode(text.as_str(), false).unwrap().get_ids().to_vec();
            let mut bytes = Vec::new();
            for &id in &ids {
                let b = vocab.token_bytes(TokenId(id)).unwrap_or_else(|| {
                    panic!(
                        "{name}: id {id} ({:?}) of {text:?} has no bytes",
                        raw.id_to_token(id)
                    )
                });
                bytes.extend_from_slice(b);
            }
            let want = if expect_prefix {
                format!(" {text}")
            } else {
                text.clone()
            };
            assert_eq!(
                String::from_utf8_lossy(&bytes),
                want,
                "{name}: the ids' bytes are not the text"
            );
            let out = tk.encode(text).unwrap();
            assert_eq!(
                vocab.decode(&out),
                text.as_bytes(),
                "{name}: output tokenization"
            );
            texts += 1;
        }
        // A schema over the vocabulary accepts the output tokens.
        let src =
            Source::json_schema(schema.clone()).with_schema_options(SchemaOptions::compliant());
        let Ok(c) = compiler.compile(&src) else {
            continue;
        };
        compiled += 1;
        for text in instances {
            // The reference: the same schema over Qwen's vocabulary. Where the
            // core rejects a valid instance (a schema it narrows, with a
            // warning), it does so whatever the vocabulary.
            match qwen_accepts(schema, text) {
                Some(true) => {}
                Some(false) => {
                    core_rejects += 1;
                    continue;
                }
                None => return,
            }
            let ids = tk.encode(text).unwrap();
            let mut m = c.matcher();
            for (i, &t) in ids.iter().enumerate() {
                assert!(
                    m.is_allowed(t),
                    "{name}: token {i} {} of {text:?} is masked",
                    vocab.describe(t)
                );
                m.advance(t).unwrap();
            }
            assert!(
                vocab.eos().iter().all(|&e| m.is_allowed(e)),
                "{name}: no stop token after {text:?}"
            );
        }
    }
    eprintln!(
        "{name}: {texts} texts round-trip, {compiled} schemas accept their instances \
         ({core_rejects} valid instances rejected over Qwen's vocabulary too, left out)"
    );
    assert!(texts > 20 && compiled > 5, "{name}: too few cases checked");
}

#[test]
fn llama3() {
    // The packaged file is the base model's: no `<|eom_id|>` (Llama 3.1).
    check("llama3", &["<|end_of_text|>", "<|eot_id|>"], false);
}

#[test]
fn deepseek_v3() {
    check("deepseek_v3", &["<｜end▁of▁sentence｜>"], false);
}

#[test]
fn gptoss() {
    check(
        "gptoss",
        &["<|return|>", "<|call|>", "<|endoftext|>"],
        false,
    );
}

#[test]
fn llama2() {
    check("llama2", &["</s>"], true);
}

#[test]
fn gemma3() {
    check("gemma3", &["<eos>", "<end_of_turn>"], false);
}

#[test]
fn sentencepiece_tokens_map_to_their_bytes() {
    let Some(dir) = tokenizer_dir("llama2") else {
        return;
    };
    let v = Vocabulary::from_tokenizer_json_file(dir.join("tokenizer.json")).unwrap();
    let raw = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let id = |s: &str| TokenId(raw.token_to_id(s).unwrap());
    assert_eq!(v.token_bytes(id("<0x0A>")), Some(&b"\n"[..]));
    assert_eq!(v.token_bytes(id("<0xE4>")), Some(&[0xE4u8][..]));
    assert_eq!(v.token_bytes(id("▁{")), Some(&b" {"[..]));
    assert_eq!(v.token_bytes(id("<s>")), None, "BOS is never text");
    assert_eq!(v.token_bytes(id("<unk>")), None);
    assert_eq!(v.token_bytes(id("</s>")), None, "EOS is never text");
}

#[test]
fn gemma_whitespace_added_tokens_are_text_and_markers_are_not() {
    let Some(dir) = tokenizer_dir("gemma3") else {
        return;
    };
    let v = Vocabulary::from_tokenizer_json_file(dir.join("tokenizer.json")).unwrap();
    let raw = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let id = |s: &str| TokenId(raw.token_to_id(s).unwrap());
    assert_eq!(v.token_bytes(id("\n\n")), Some(&b"\n\n"[..]));
    assert_eq!(v.token_bytes(id("▁▁▁")), Some(&b"   "[..]));
    assert_eq!(v.token_bytes(id("<unused0>")), None);
    assert_eq!(v.token_bytes(id("<start_of_turn>")), None);
    assert_eq!(v.token_bytes(id("<end_of_turn>")), None);
    // `</s>` is Gemma's HTML strikethrough tag, not a stop token.
    assert!(!v.is_eos(id("</s>")), "stops: {:?}", v.eos());
    assert!(v.is_eos(id("<eos>")) && v.is_eos(id("<end_of_turn>")));
}

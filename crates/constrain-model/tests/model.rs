//! The model layer: the candle Qwen2 / Qwen3 implementation on tiny random GGUF
//! files written here (no small Qwen3 checkpoint exists offline), the GGUF
//! tokenizer against Qwen's real `tokenizer.json`, error paths, and the real
//! Qwen2.5-Coder-0.5B GGUF (skipped with a message when the assets are missing).

use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use constrain_model::{
    gguf::GgufFile, gguf_tokenizer, load, Architecture, LanguageModel, ModelError, QwenModel,
    TokenizerSource,
};
use constrain_testkit::tiny::{write_tiny_gguf, TinySpec, TINY_MERGES};
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("constrain-model-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn home() -> PathBuf {
    match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        }
    }
}

fn asset(name: &str) -> Option<PathBuf> {
    let p = home().join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipping: {} not found (set CONSTRAIN_HOME or run the asset fetch)",
            p.display()
        );
        None
    }
}

const GGUF: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

fn ids(v: &[u32]) -> Vec<TokenId> {
    v.iter().map(|&i| TokenId(i)).collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn argmax(l: &[f32]) -> usize {
    l.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap()
        .0
}

/// KV cache, batching and restart behave on a tiny model of `arch`.
fn check_tiny(arch: &str) {
    let path = tmp(&format!("tiny-{arch}.gguf"));
    let spec = TinySpec {
        arch: arch.into(),
        ..TinySpec::default()
    };
    let width = write_tiny_gguf(&path, &spec).unwrap();
    let mut loaded = load(&path, &TokenizerSource::Gguf).unwrap();
    let m = &mut loaded.model;
    assert_eq!(m.architecture().name(), arch);
    assert_eq!(m.logits_width(), width);
    assert_eq!(loaded.vocab.logits_width(), width);
    assert_eq!(m.context_length(), spec.context);

    let seq = ids(&[10, 40, 77, 256, 200, 3, 91, 5]);
    // One batched pass = one token at a time through the KV cache.
    let full = m.forward(&seq, 0).unwrap();
    assert_eq!(full.len(), width);
    assert!(full.iter().all(|x| x.is_finite()));
    let mut step = Vec::new();
    for (i, t) in seq.iter().enumerate() {
        step = m.forward(std::slice::from_ref(t), i).unwrap();
    }
    assert!(max_abs_diff(&full, &step) < 1e-3, "incremental != batched");
    // Prefill then a batch at a later position (jump-forward) = the same.
    m.forward(&seq[..3], 0).unwrap();
    let jumped = m.forward(&seq[3..], 3).unwrap();
    assert!(
        max_abs_diff(&full, &jumped) < 1e-3,
        "batch at offset != batched"
    );
    // Restarting at 0 forgets the cache.
    let again = m.forward(&seq, 0).unwrap();
    assert!(max_abs_diff(&full, &again) < 1e-5);
    // Different histories give different logits (the cache is really used).
    let other = m
        .forward(&ids(&[11, 40, 77, 256, 200, 3, 91, 5]), 0)
        .unwrap();
    assert!(max_abs_diff(&full, &other) > 1e-4);

    // Contract violations are errors, not panics.
    assert!(matches!(
        m.forward(&seq, 3),
        Err(ModelError::Position {
            expected: 8,
            got: 3
        })
    ));
    assert!(matches!(m.forward(&[], 8), Err(ModelError::EmptyBatch)));
    assert!(matches!(
        m.forward(&ids(&[width as u32]), 8),
        Err(ModelError::TokenOutOfRange { .. })
    ));
    let long = vec![TokenId(1); spec.context + 1];
    assert!(matches!(
        m.forward(&long, 0),
        Err(ModelError::ContextOverflow { .. })
    ));
    m.reset();
    assert_eq!(m.forward(&seq, 0).unwrap(), again);
}

#[test]
fn tiny_qwen3_kv_cache_and_batching() {
    check_tiny("qwen3");
}

#[test]
fn tiny_qwen2_kv_cache_and_batching() {
    check_tiny("qwen2");
}

#[test]
fn tiny_gguf_tokenizer_applies_merges_and_added_tokens() {
    let path = tmp("tiny-tok.gguf");
    write_tiny_gguf(&path, &TinySpec::default()).unwrap();
    let file = GgufFile::open(&path).unwrap();
    let t = gguf_tokenizer(&file).unwrap();
    let merged = |s: &str| {
        256 + TINY_MERGES
            .iter()
            .position(|(a, b)| format!("{a}{b}") == s)
            .unwrap() as u32
    };
    let got = t.tokenizer.encode("{\"name\":").unwrap();
    assert_eq!(got, ids(&[merged("{\""), merged("name"), merged("\":")]));
    assert_eq!(t.vocab.decode(&got), b"{\"name\":");
    // Control tokens are recognised in text and are EOS where named so.
    let im_end = t.tokenizer.token_to_id("<|im_end|>").unwrap();
    let eot = t.tokenizer.token_to_id("<|endoftext|>").unwrap();
    assert_eq!(
        t.tokenizer.encode("a<|im_end|>").unwrap(),
        vec![TokenId(b'a' as u32), im_end]
    );
    assert_eq!(t.eos_token_id, Some(im_end));
    assert!(t.vocab.is_eos(im_end) && t.vocab.is_eos(eot));
    // Added tokens are kept out of the index; padding ids are holes.
    let tool = t.tokenizer.token_to_id("<tool_call>").unwrap();
    assert_eq!(t.vocab.token_bytes(tool), None);
    assert_eq!(t.vocab.num_ids() as u32, tool.0 + 1);
    // Non-ASCII text goes through byte tokens and round-trips.
    let s = "héllo 中文 🎉";
    assert_eq!(
        t.vocab.decode(&t.tokenizer.encode(s).unwrap()),
        s.as_bytes()
    );
}

#[test]
fn file_errors_are_typed_and_name_the_file() {
    let missing = tmp("does-not-exist.gguf");
    let e = load(&missing, &TokenizerSource::Gguf).unwrap_err();
    assert!(matches!(e, ModelError::NotFound { .. }), "{e}");
    assert!(e.to_string().contains("does-not-exist.gguf"));

    let garbage = tmp("garbage.gguf");
    std::fs::write(&garbage, b"this is not a gguf file at all").unwrap();
    let e = load(&garbage, &TokenizerSource::Gguf).unwrap_err();
    assert!(matches!(e, ModelError::Corrupt { .. }), "{e}");

    let good = tmp("tiny-for-truncation.gguf");
    write_tiny_gguf(&good, &TinySpec::default()).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let cut = tmp("truncated.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() - 1000]).unwrap();
    let e = load(&cut, &TokenizerSource::Gguf).unwrap_err();
    assert!(matches!(e, ModelError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("truncated"));
    // Cut inside the header: a parse error, not a panic.
    std::fs::write(&cut, &bytes[..200]).unwrap();
    let e = load(&cut, &TokenizerSource::Gguf).unwrap_err();
    assert!(matches!(e, ModelError::Corrupt { .. }), "{e}");

    let llama = tmp("tiny-llama.gguf");
    let spec = TinySpec {
        arch: "llama".into(),
        ..TinySpec::default()
    };
    write_tiny_gguf(&llama, &spec).unwrap();
    let e = QwenModel::load(&llama).unwrap_err();
    assert!(
        matches!(e, ModelError::UnsupportedArchitecture { ref arch, .. } if arch == "llama"),
        "{e}"
    );

    let bare = tmp("tiny-no-tokenizer.gguf");
    let spec = TinySpec {
        tokenizer: false,
        ..TinySpec::default()
    };
    write_tiny_gguf(&bare, &spec).unwrap();
    let e = load(&bare, &TokenizerSource::Gguf).unwrap_err();
    assert!(matches!(e, ModelError::Tokenizer(_)), "{e}");
    assert!(e.to_string().contains("tokenizer.json"));
    // The weights alone still load.
    assert_eq!(
        QwenModel::load(&bare).unwrap().architecture(),
        Architecture::Qwen3
    );
}

#[test]
fn tokenizer_larger_than_the_model_is_a_mismatch() {
    let Some(json) = asset("tokenizer.json") else {
        return;
    };
    let path = tmp("tiny-mismatch.gguf");
    write_tiny_gguf(&path, &TinySpec::default()).unwrap();
    let e = load(&path, &TokenizerSource::Json(json)).unwrap_err();
    assert!(matches!(e, ModelError::Mismatch(_)), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("151669") && msg.contains("logits"), "{msg}");
}

#[test]
fn real_gguf_tokenizer_matches_tokenizer_json() {
    let (Some(gguf), Some(json)) = (asset(GGUF), asset("tokenizer.json")) else {
        return;
    };
    let file = GgufFile::open(&gguf).unwrap();
    let g = gguf_tokenizer(&file).unwrap();
    let j = TextTokenizer::from_file(&json).unwrap();
    let jv = Vocabulary::from_tokenizer_json_file(&json).unwrap();
    let texts = [
        "Hello, world!",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}",
        "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n\n\n\t\tindented   spaces   ",
        "The year 2024 had 366 days; π ≈ 3.14159, e ≈ 2.71828.",
        "中文分词测试，日本語のテキスト、한국어 텍스트.",
        "emoji 🎉🚀 and combining e\u{301} (NFC) café naïve",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
        "'s 't 're 've 'm 'll 'd I'M YOU'RE",
        "   leading and trailing   \r\n\r\nCRLF\n",
        "<tool_call>\n{\"name\": \"x\"}\n</tool_call>",
        "",
    ];
    for t in texts {
        assert_eq!(
            g.tokenizer.encode(t).unwrap(),
            j.encode(t).unwrap(),
            "tokenizing {t:?}"
        );
    }
    // Same bytes for every id the GGUF knows, same EOS set.
    assert_eq!(g.eos_token_id, Some(TokenId(151645)));
    assert_eq!(g.vocab.eos(), jv.eos());
    for id in 0..g.vocab.num_ids() as u32 {
        assert_eq!(
            g.vocab.token_bytes(TokenId(id)),
            jv.token_bytes(TokenId(id)),
            "token {id}"
        );
    }
    // Known difference: this GGUF predates the four added tokens Qwen later
    // appended to tokenizer.json; those texts tokenize as ordinary BPE pieces.
    let missing: Vec<&str> = jv
        .added_tokens()
        .iter()
        .filter(|a| a.0.as_usize() >= g.vocab.num_ids())
        .map(|a| a.1.as_str())
        .collect();
    assert_eq!(
        missing,
        ["<tool_response>", "</tool_response>", "<think>", "</think>"]
    );
}

#[test]
fn real_model_predicts_sensibly_and_caches_consistently() {
    let Some(gguf) = asset(GGUF) else { return };
    let mut loaded = load(&gguf, &TokenizerSource::Gguf).unwrap();
    assert_eq!(loaded.model.architecture(), Architecture::Qwen2);
    assert_eq!(loaded.model.logits_width(), 151_936);
    assert_eq!(loaded.vocab.logits_width(), 151_936);
    let prompt = loaded.tokenizer.encode("The capital of France is").unwrap();
    let m = &mut loaded.model;
    let full = m.forward(&prompt, 0).unwrap();
    let best = TokenId(argmax(&full) as u32);
    assert_eq!(loaded.vocab.decode(&[best]), b" Paris");
    // The same logits through the cache, split in two batches.
    m.forward(&prompt[..2], 0).unwrap();
    let split = m.forward(&prompt[2..], 2).unwrap();
    assert_eq!(argmax(&split), argmax(&full));
    assert!(
        max_abs_diff(&full, &split) < 0.05,
        "{}",
        max_abs_diff(&full, &split)
    );
}

//! Tiny random-weight GGUF files, for tests and offline examples.
//!
//! No small Qwen3 checkpoint is available offline, so the Qwen3 path (and the
//! GGUF tokenizer reader, and the error paths) are exercised on files this
//! module writes with candle's `gguf_file::write`: the real metadata layout and
//! tensor names of llama.cpp's `qwen2` / `qwen3` exports, a byte-level BPE
//! vocabulary of the 256 bytes plus a few merges and Qwen's control tokens,
//! and random `F32` weights. The output is meaningless text; what the files
//! check is that loading, the KV cache and batching behave.

use candle_core::quantized::{gguf_file::Value, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use constrain::vocab::bytelevel::byte_to_char;
use constrain_model::ModelError;
use rand::{Rng, SeedableRng};
use std::path::Path;

/// What to write (defaults: a 2-layer Qwen3 with hidden size 32).
#[derive(Clone, Debug)]
pub struct TinySpec {
    /// `general.architecture`: `"qwen2"`, `"qwen3"`, or anything else to test
    /// the unsupported-architecture error.
    pub arch: String,
    /// Width of the hidden state (default 32).
    pub hidden: usize,
    /// Number of transformer blocks (default 2).
    pub layers: usize,
    /// Number of attention query heads (default 4).
    pub heads: usize,
    /// Number of key/value heads (default 2).
    pub kv_heads: usize,
    /// Width of the feed-forward layer (default 64).
    pub ffn: usize,
    /// The context length written to the metadata, in tokens (default 512).
    pub context: usize,
    /// Extra embedding rows past the tokenizer (padded logits, as Qwen has).
    pub pad: usize,
    /// Whether to write the `tokenizer.ggml.*` metadata.
    pub tokenizer: bool,
    /// Seed of the random weights (default 7).
    pub seed: u64,
    /// `tokenizer.chat_template`, written with the tokenizer when set.
    pub chat_template: Option<String>,
}

impl Default for TinySpec {
    fn default() -> Self {
        TinySpec {
            arch: "qwen3".into(),
            hidden: 32,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            ffn: 64,
            context: 512,
            pad: 5,
            tokenizer: true,
            seed: 7,
            chat_template: None,
        }
    }
}

/// The merges of the tiny vocabulary (GPT-2 byte-level strings).
pub const TINY_MERGES: &[(&str, &str)] = &[
    ("{", "\""),
    ("\"", ":"),
    ("\"", ","),
    ("Ġ", "\""),
    ("i", "n"),
    ("e", "r"),
    ("Ġ", "Ġ"),
    ("n", "a"),
    ("na", "m"),
    ("nam", "e"),
];

/// The control / added tokens after the merges: (text, special).
pub const TINY_ADDED: &[(&str, bool)] = &[
    ("<|endoftext|>", true),
    ("<|im_start|>", true),
    ("<|im_end|>", true),
    ("<tool_call>", false),
];

/// Writes a tiny random-weight GGUF to `path`; returns its logits width.
pub fn write_tiny_gguf(path: impl AsRef<Path>, spec: &TinySpec) -> Result<usize, ModelError> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let err = |source: candle_core::Error| ModelError::Load {
        path: shown.clone(),
        source,
    };
    let b2c = byte_to_char();
    let mut tokens: Vec<String> = b2c.iter().map(|c| c.to_string()).collect();
    let mut types: Vec<i32> = vec![1; 256];
    for (a, b) in TINY_MERGES {
        tokens.push(format!("{a}{b}"));
        types.push(1);
    }
    for (t, special) in TINY_ADDED {
        tokens.push(t.to_string());
        types.push(if *special { 3 } else { 4 });
    }
    let n_ids = tokens.len();
    let width = n_ids + spec.pad;
    for i in n_ids..width {
        tokens.push(format!("[PAD{i}]"));
        types.push(5);
    }
    let eos = (256 + TINY_MERGES.len() + 2) as u32; // <|im_end|>

    let a = spec.arch.as_str();
    let head_dim = spec.hidden / spec.heads;
    let mut md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(a.into())),
        ("general.name".into(), Value::String("tiny random".into())),
        (format!("{a}.block_count"), Value::U32(spec.layers as u32)),
        (
            format!("{a}.context_length"),
            Value::U32(spec.context as u32),
        ),
        (
            format!("{a}.embedding_length"),
            Value::U32(spec.hidden as u32),
        ),
        (
            format!("{a}.feed_forward_length"),
            Value::U32(spec.ffn as u32),
        ),
        (
            format!("{a}.attention.head_count"),
            Value::U32(spec.heads as u32),
        ),
        (
            format!("{a}.attention.head_count_kv"),
            Value::U32(spec.kv_heads as u32),
        ),
        (
            format!("{a}.attention.key_length"),
            Value::U32(head_dim as u32),
        ),
        (
            format!("{a}.attention.value_length"),
            Value::U32(head_dim as u32),
        ),
        (format!("{a}.rope.freq_base"), Value::F32(1_000_000.0)),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-6),
        ),
    ];
    if spec.tokenizer {
        md.push(("tokenizer.ggml.model".into(), Value::String("gpt2".into())));
        md.push(("tokenizer.ggml.pre".into(), Value::String("qwen2".into())));
        if let Some(t) = &spec.chat_template {
            md.push(("tokenizer.chat_template".into(), Value::String(t.clone())));
        }
        md.push((
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ));
        md.push((
            "tokenizer.ggml.token_type".into(),
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ));
        md.push((
            "tokenizer.ggml.merges".into(),
            Value::Array(
                TINY_MERGES
                    .iter()
                    .map(|(a, b)| Value::String(format!("{a} {b}")))
                    .collect(),
            ),
        ));
        md.push(("tokenizer.ggml.eos_token_id".into(), Value::U32(eos)));
    }

    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
    let dev = Device::Cpu;
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut add =
        |name: String, dims: &[usize], scale: f32, offset: f32| -> Result<(), ModelError> {
            let n: usize = dims.iter().product();
            let data: Vec<f32> = (0..n)
                .map(|_| offset + scale * (rng.random::<f32>() * 2.0 - 1.0))
                .collect();
            let t = Tensor::from_vec(data, dims, &dev).map_err(err)?;
            let q = QTensor::quantize(&t, GgmlDType::F32).map_err(err)?;
            tensors.push((name, q));
            Ok(())
        };
    let (h, kv) = (spec.hidden, spec.kv_heads * head_dim);
    add("token_embd.weight".into(), &[width, h], 1.0, 0.0)?;
    add("output_norm.weight".into(), &[h], 0.1, 1.0)?;
    for l in 0..spec.layers {
        let p = format!("blk.{l}");
        add(format!("{p}.attn_norm.weight"), &[h], 0.1, 1.0)?;
        add(format!("{p}.ffn_norm.weight"), &[h], 0.1, 1.0)?;
        add(
            format!("{p}.attn_q.weight"),
            &[spec.heads * head_dim, h],
            0.3,
            0.0,
        )?;
        add(format!("{p}.attn_k.weight"), &[kv, h], 0.3, 0.0)?;
        add(format!("{p}.attn_v.weight"), &[kv, h], 0.3, 0.0)?;
        add(
            format!("{p}.attn_output.weight"),
            &[h, spec.heads * head_dim],
            0.3,
            0.0,
        )?;
        add(format!("{p}.ffn_gate.weight"), &[spec.ffn, h], 0.3, 0.0)?;
        add(format!("{p}.ffn_up.weight"), &[spec.ffn, h], 0.3, 0.0)?;
        add(format!("{p}.ffn_down.weight"), &[h, spec.ffn], 0.3, 0.0)?;
        if a == "qwen3" {
            add(format!("{p}.attn_q_norm.weight"), &[head_dim], 0.1, 1.0)?;
            add(format!("{p}.attn_k_norm.weight"), &[head_dim], 0.1, 1.0)?;
        } else {
            add(
                format!("{p}.attn_q.bias"),
                &[spec.heads * head_dim],
                0.1,
                0.0,
            )?;
            add(format!("{p}.attn_k.bias"), &[kv], 0.1, 0.0)?;
            add(format!("{p}.attn_v.bias"), &[kv], 0.1, 0.0)?;
        }
    }

    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut f = std::fs::File::create(path).map_err(|source| ModelError::Io {
        path: shown.clone(),
        source,
    })?;
    candle_core::quantized::gguf_file::write(&mut f, &md_refs, &t_refs).map_err(err)?;
    Ok(width)
}

/// The tiny vocabulary's tokenizer (256 byte tokens, [`TINY_MERGES`],
/// [`TINY_ADDED`]; EOS `<|im_end|>` and `<|endoftext|>`), built offline
/// through a GGUF written to the temp directory. Logits width: ids + 5.
pub fn tokenizer() -> Result<constrain_model::GgufTokenizer, ModelError> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "constrain-tiny-tokenizer-{}-{}.gguf",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let spec = TinySpec {
        layers: 0,
        ..TinySpec::default()
    };
    let width = write_tiny_gguf(&path, &spec)?;
    let file = constrain_model::gguf::GgufFile::open(&path);
    let _ = std::fs::remove_file(&path);
    let mut t = constrain_model::gguf_tokenizer(&file?)?;
    t.vocab = t.vocab.with_logits_width(width)?;
    Ok(t)
}

/// The token index of the regex `re` over `vocab` (default compiler
/// settings), as the generation tests over the tiny vocabulary use it.
pub fn regex_index(
    re: &str,
    vocab: &std::sync::Arc<constrain::vocab::Vocabulary>,
) -> std::sync::Arc<constrain::TokenIndex> {
    constrain::Compiler::new(vocab.clone(), constrain::CompilerConfig::default())
        .compile(&constrain::Source::regex(re))
        .unwrap()
        .index()
        .clone()
}

/// The text token of `vocab` whose bytes are `bytes` (panics when none is).
pub fn token_id(vocab: &constrain::vocab::Vocabulary, bytes: &[u8]) -> constrain::vocab::TokenId {
    vocab
        .text_tokens()
        .find(|&(_, b)| b == bytes)
        .map(|(t, _)| t)
        .unwrap()
}

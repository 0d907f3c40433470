//! The candle implementation of [`LanguageModel`] for quantized Qwen2 / Qwen3
//! GGUF files, on CPU, with a KV cache.

use crate::gguf::GgufFile;
use crate::{check_compatible, gguf_tokenizer, LanguageModel, ModelError};
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{quantized_qwen2, quantized_qwen3};
use constrain::vocab::TokenId;
use constrain::vocab::{TextTokenizer, Vocabulary};
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

/// The model families [`QwenModel`] runs, from `general.architecture`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// Qwen2 / Qwen2.5 (`qwen2`): biased Q/K/V projections.
    Qwen2,
    /// Qwen3 (`qwen3`): per-head Q/K RMS norms, no biases.
    Qwen3,
}

impl Architecture {
    /// The GGUF name.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
        }
    }
}

enum Weights {
    Qwen2(quantized_qwen2::ModelWeights),
    Qwen3(quantized_qwen3::ModelWeights),
}

/// A quantized Qwen model loaded from GGUF, running on the CPU.
pub struct QwenModel {
    weights: Weights,
    arch: Architecture,
    device: Device,
    logits_width: usize,
    context_length: usize,
    /// Tokens fed since the last start (the KV cache length).
    fed: usize,
    eos_token_id: Option<TokenId>,
}

impl std::fmt::Debug for QwenModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QwenModel")
            .field("arch", &self.arch)
            .field("logits_width", &self.logits_width)
            .field("context_length", &self.context_length)
            .field("fed", &self.fed)
            .finish()
    }
}

impl QwenModel {
    /// Loads the weights of a GGUF file (no tokenizer; see [`load`]).
    pub fn load(path: impl AsRef<Path>) -> Result<QwenModel, ModelError> {
        Self::from_file(GgufFile::open(path)?)
    }

    /// Loads the weights of an opened GGUF file.
    pub fn from_file(mut file: GgufFile) -> Result<QwenModel, ModelError> {
        let shown = file.path.display().to_string();
        let arch = match file.architecture()? {
            "qwen2" => Architecture::Qwen2,
            "qwen3" => Architecture::Qwen3,
            other => {
                return Err(ModelError::UnsupportedArchitecture {
                    path: shown,
                    arch: other.to_string(),
                })
            }
        };
        let a = arch.name();
        let context_length = file.integer(&format!("{a}.context_length"))? as usize;
        let logits_width = header_logits_width(&file)?;
        let eos_token_id = file
            .opt_integer("tokenizer.ggml.eos_token_id")
            .ok()
            .flatten()
            .map(|e| TokenId(e as u32));
        let device = Device::Cpu;
        let content = std::mem::replace(
            &mut file.content,
            candle_core::quantized::gguf_file::Content {
                magic: candle_core::quantized::gguf_file::VersionedMagic::GgufV3,
                metadata: Default::default(),
                tensor_infos: Default::default(),
                tensor_data_offset: 0,
            },
        );
        let load = |source| ModelError::Load {
            path: shown.clone(),
            source,
        };
        crate::mark_pools_used();
        let weights = match arch {
            Architecture::Qwen2 => Weights::Qwen2(
                quantized_qwen2::ModelWeights::from_gguf(content, &mut file.reader, &device)
                    .map_err(load)?,
            ),
            Architecture::Qwen3 => Weights::Qwen3(
                quantized_qwen3::ModelWeights::from_gguf(content, &mut file.reader, &device)
                    .map_err(load)?,
            ),
        };
        Ok(QwenModel {
            weights,
            arch,
            device,
            logits_width,
            context_length,
            fed: 0,
            eos_token_id,
        })
    }

    /// The architecture read from `general.architecture`.
    pub fn architecture(&self) -> Architecture {
        self.arch
    }

    /// `tokenizer.ggml.eos_token_id`, when the file names one.
    pub fn eos_token_id(&self) -> Option<TokenId> {
        self.eos_token_id
    }
}

impl LanguageModel for QwenModel {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::EmptyBatch);
        }
        if pos != 0 && pos != self.fed {
            return Err(ModelError::Position {
                expected: self.fed,
                got: pos,
            });
        }
        let needed = pos + tokens.len();
        if needed > self.context_length {
            return Err(ModelError::ContextOverflow {
                needed,
                context: self.context_length,
            });
        }
        if let Some(&t) = tokens.iter().find(|t| t.as_usize() >= self.logits_width) {
            return Err(ModelError::TokenOutOfRange {
                token: t,
                width: self.logits_width,
            });
        }
        if pos == 0 {
            self.reset();
        }
        let ids: Vec<u32> = tokens.iter().map(|t| t.0).collect();
        let fwd = |source| ModelError::Forward { pos, source };
        let input = Tensor::new(ids.as_slice(), &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(fwd)?;
        let out = match &mut self.weights {
            Weights::Qwen2(w) => w.forward(&input, pos),
            Weights::Qwen3(w) => w.forward(&input, pos),
        };
        // A failed pass may have left a partial cache entry: force a restart.
        let out = out.map_err(|e| {
            self.fed = usize::MAX;
            fwd(e)
        })?;
        let logits = out
            .flatten_all()
            .and_then(|t| t.to_dtype(DType::F32))
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(fwd)?;
        self.fed = needed;
        Ok(logits)
    }

    fn reset(&mut self) {
        match &mut self.weights {
            Weights::Qwen2(w) => w.clear_kv_cache(),
            Weights::Qwen3(w) => w.clear_kv_cache(),
        }
        self.fed = 0;
    }

    fn logits_width(&self) -> usize {
        self.logits_width
    }

    fn context_length(&self) -> usize {
        self.context_length
    }
}

/// Where the tokenizer comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TokenizerSource {
    /// The `tokenizer.ggml.*` metadata of the GGUF file itself (default).
    #[default]
    Gguf,
    /// A Hugging Face `tokenizer.json`.
    Json(PathBuf),
}

/// A model with the tokenizer and vocabulary that go with it, checked to agree.
pub struct LoadedModel {
    /// The weights.
    pub model: QwenModel,
    /// Text → token ids (prompts, jump-forward).
    pub tokenizer: TextTokenizer,
    /// Token ids → bytes, EOS set; widened to the model's logits width.
    pub vocab: Arc<Vocabulary>,
}

/// Loads a GGUF model and its tokenizer and checks that they agree: every
/// tokenizer id below the logits width, and the model's EOS id
/// (`tokenizer.ggml.eos_token_id`) among the tokenizer's EOS ids.
pub fn load(
    model: impl AsRef<Path>,
    tokenizer: &TokenizerSource,
) -> Result<LoadedModel, ModelError> {
    let file = GgufFile::open(model)?;
    let (text, vocab) = match tokenizer {
        TokenizerSource::Gguf => {
            if !file.metadata().contains_key("tokenizer.ggml.tokens") {
                return Err(ModelError::Tokenizer(format!(
                    "{} holds no tokenizer (tokenizer.ggml.tokens); pass a tokenizer.json",
                    file.path().display()
                )));
            }
            let t = gguf_tokenizer(&file)?;
            (t.tokenizer, t.vocab)
        }
        TokenizerSource::Json(p) => (
            TextTokenizer::from_file(p)?,
            Vocabulary::from_tokenizer_json_file(p)?,
        ),
    };
    // Check agreement before the (slow) weight load.
    let vocab = check_compatible(vocab, header_logits_width(&file)?)?;
    let model = QwenModel::from_file(file)?;
    if let Some(eos) = model.eos_token_id() {
        if !vocab.is_eos(eos) {
            return Err(ModelError::Mismatch(format!(
                "the model's end-of-sequence token is {eos} but the tokenizer's are {:?}",
                vocab.eos().iter().map(|t| t.0).collect::<Vec<_>>()
            )));
        }
    }
    Ok(LoadedModel {
        model,
        tokenizer: text,
        vocab: Arc::new(vocab),
    })
}

/// The logits width from the tensor shapes: rows of `output.weight`, or of
/// `token_embd.weight` when the output is tied to the embeddings.
fn header_logits_width(file: &GgufFile) -> Result<usize, ModelError> {
    let rows = |name: &str| file.tensor_shape(name).and_then(|s| s.first().copied());
    rows("output.weight")
        .or_else(|| rows("token_embd.weight"))
        .ok_or_else(|| file.meta_err("token_embd.weight", "the embedding tensor is missing"))
}

impl std::fmt::Debug for LoadedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModel")
            .field("model", &self.model)
            .field("vocab", &self.vocab)
            .finish()
    }
}

//! [`LanguageModel`] for quantized Qwen2 / Qwen3 GGUF files, on CPU: one
//! sequence ([`Sequence`]) over shared weights ([`QwenWeights`], see
//! [`crate::net`]), with a KV cache that truncates and forks.

use crate::gguf::GgufFile;
pub use crate::net::Architecture;
use crate::net::{QwenWeights, Sequence};
use crate::{check_compatible, gguf_tokenizer, LanguageModel, ModelError, SequenceBatch, Wanted};
use constrain::vocab::TokenId;
use constrain::vocab::{TextTokenizer, Vocabulary};
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

/// A quantized Qwen model loaded from GGUF, running on the CPU: shared
/// weights and one sequence of its own. [`QwenModel::fork`] makes another
/// sequence over the same weights.
pub struct QwenModel {
    weights: Arc<QwenWeights>,
    seq: Sequence,
    eos_token_id: Option<TokenId>,
}

impl std::fmt::Debug for QwenModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.weights.config();
        f.debug_struct("QwenModel")
            .field("arch", &c.arch)
            .field("logits_width", &c.logits_width)
            .field("context_length", &c.context_length)
            .field("fed", &self.seq.len())
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
        let eos_token_id = file
            .opt_integer("tokenizer.ggml.eos_token_id")
            .ok()
            .flatten()
            .map(|e| TokenId(e as u32));
        let weights = Arc::new(QwenWeights::from_gguf(&mut file)?);
        let mut m = QwenModel::from_weights(weights);
        m.eos_token_id = eos_token_id;
        Ok(m)
    }

    /// A model with a new, empty sequence over shared weights.
    pub fn from_weights(weights: Arc<QwenWeights>) -> QwenModel {
        QwenModel {
            seq: weights.sequence(),
            weights,
            eos_token_id: None,
        }
    }

    /// The shared weights.
    pub fn weights(&self) -> &Arc<QwenWeights> {
        &self.weights
    }

    /// This model's sequence (KV cache and position).
    pub fn sequence(&self) -> &Sequence {
        &self.seq
    }

    /// A second model over the same weights that continues from this one's
    /// sequence (its KV cache copied); the two then go their own ways.
    pub fn fork(&self) -> QwenModel {
        QwenModel {
            weights: self.weights.clone(),
            seq: self.seq.fork(),
            eos_token_id: self.eos_token_id,
        }
    }

    /// A copy holding only the first `len` positions of this model's
    /// sequence (`None` past its end); see [`Sequence::fork_prefix`].
    pub fn fork_prefix(&self, len: usize) -> Option<QwenModel> {
        Some(QwenModel {
            weights: self.weights.clone(),
            seq: self.seq.fork_prefix(len)?,
            eos_token_id: self.eos_token_id,
        })
    }

    /// One decoding step over several models that share weights: feeds
    /// `tokens[i]` to `models[i]` (each at its own position) in one batched
    /// pass and returns each one's logits.
    pub fn step_batch(
        models: &mut [&mut QwenModel],
        tokens: &[TokenId],
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let Some(first) = models.first() else {
            return Err(ModelError::EmptyBatch);
        };
        let weights = first.weights.clone();
        if models.iter().any(|m| !Arc::ptr_eq(&m.weights, &weights)) {
            return Err(ModelError::Batch(
                "the models do not share one copy of the weights".into(),
            ));
        }
        let mut seqs: Vec<&mut Sequence> = models.iter_mut().map(|m| &mut m.seq).collect();
        weights.step_batch(&mut seqs, tokens)
    }

    /// One pass over several models that share weights: feeds `chunks[i]`
    /// (one or more tokens: a step, a jump-forward stretch, a prompt) to
    /// `models[i]` after what it holds; each one's logits after its last
    /// token. The matmuls run once over all the rows.
    pub fn forward_batch(
        models: &mut [&mut QwenModel],
        chunks: &[&[TokenId]],
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        Self::batch_pass(models, chunks, None)
    }

    /// [`QwenModel::forward_batch`] where the callers will read only the
    /// logits `wanted` names, for every row (the union of their masks; see
    /// [`LanguageModel::forward_masked`]): the output head may be narrowed
    /// to them, the others left `-inf`.
    pub fn forward_batch_masked(
        models: &mut [&mut QwenModel],
        chunks: &[&[TokenId]],
        wanted: Wanted<'_>,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        Self::batch_pass(models, chunks, Some(wanted))
    }

    fn batch_pass(
        models: &mut [&mut QwenModel],
        chunks: &[&[TokenId]],
        wanted: Option<Wanted<'_>>,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let Some(first) = models.first() else {
            return Err(ModelError::EmptyBatch);
        };
        let weights = first.weights.clone();
        if models.iter().any(|m| !Arc::ptr_eq(&m.weights, &weights)) {
            return Err(ModelError::Batch(
                "the models do not share one copy of the weights".into(),
            ));
        }
        let mut seqs: Vec<&mut Sequence> = models.iter_mut().map(|m| &mut m.seq).collect();
        weights.pass_with(&mut seqs, chunks, false, wanted)
    }

    /// The architecture read from `general.architecture`.
    pub fn architecture(&self) -> Architecture {
        self.weights.config().arch
    }

    /// `tokenizer.ggml.eos_token_id`, when the file names one.
    pub fn eos_token_id(&self) -> Option<TokenId> {
        self.eos_token_id
    }

    /// Checks a forward call's position; restarts the sequence at 0.
    fn position(&mut self, tokens: &[TokenId], pos: usize) -> Result<(), ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::EmptyBatch);
        }
        if pos != 0 && pos != self.seq.len() {
            return Err(ModelError::Position {
                expected: self.seq.len(),
                got: pos,
            });
        }
        let c = self.weights.config();
        if pos + tokens.len() > c.context_length {
            return Err(ModelError::ContextOverflow {
                needed: pos + tokens.len(),
                context: c.context_length,
            });
        }
        if pos == 0 {
            self.seq.clear();
        }
        Ok(())
    }
}

impl LanguageModel for QwenModel {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        self.position(tokens, pos)?;
        self.weights.forward(&mut self.seq, tokens)
    }

    fn forward_masked(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        self.position(tokens, pos)?;
        self.weights.forward_masked(&mut self.seq, tokens, wanted)
    }

    fn forward_all(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        self.position(tokens, pos)?;
        self.weights.forward_all(&mut self.seq, tokens)
    }

    fn truncate(&mut self, len: usize) -> bool {
        if len > self.seq.len() {
            return false;
        }
        self.seq.truncate(len);
        true
    }

    fn reset(&mut self) {
        self.seq.clear();
    }

    fn sequence_batch(&self, len: usize) -> Option<Box<dyn SequenceBatch>> {
        Some(Box::new(QwenSequences {
            weights: self.weights.clone(),
            seqs: vec![self.seq.fork_prefix(len)?],
        }))
    }

    fn logits_width(&self) -> usize {
        self.weights.config().logits_width
    }

    fn context_length(&self) -> usize {
        self.weights.config().context_length
    }
}

/// [`QwenModel::sequence_batch`]: sequences over shared weights, stepped by
/// [`QwenWeights::step_batch`] (rows bitwise those of single steps).
struct QwenSequences {
    weights: Arc<QwenWeights>,
    seqs: Vec<Sequence>,
}

impl SequenceBatch for QwenSequences {
    fn len(&self) -> usize {
        self.seqs.len()
    }

    fn reorder(&mut self, parents: &[usize]) -> Result<(), ModelError> {
        crate::reorder_batch(&mut self.seqs, parents, Sequence::fork)
    }

    fn step(&mut self, tokens: &[TokenId]) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut refs: Vec<&mut Sequence> = self.seqs.iter_mut().collect();
        self.weights.step_batch(&mut refs, tokens)
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

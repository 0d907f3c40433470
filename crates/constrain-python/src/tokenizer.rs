//! `TokenizerInfo`: a vocabulary (token id → bytes, stop tokens, logits
//! width), as XGrammar's class of the same name.

use crate::errors;
use constrain::vocab::{StopConfig, TokenId, Vocabulary};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::path::PathBuf;
use std::sync::Arc;

/// A tokenizer's vocabulary: the bytes of every token id, the stop tokens
/// and the logits width (`vocab_size`). Ids at or past the tokenizer's size
/// (padding rows of the model's embedding) are never allowed.
#[pyclass(frozen, module = "constrain")]
pub struct TokenizerInfo {
    pub vocab: Arc<Vocabulary>,
}

fn build(
    py: Python<'_>,
    json: String,
    stops: &StopConfig,
    vocab_size: Option<usize>,
    stop_token_ids: Option<Vec<u32>>,
) -> PyResult<TokenizerInfo> {
    let vocab = py
        .detach(|| -> Result<Vocabulary, constrain::VocabError> {
            let mut v = Vocabulary::from_tokenizer_json_with_stops(&json, stops)?;
            if let Some(stop) = stop_token_ids {
                v = v.with_eos(stop.into_iter().map(TokenId).collect())?;
            }
            if let Some(w) = vocab_size {
                v = v.with_logits_width(w)?;
            }
            Ok(v)
        })
        .map_err(errors::from_vocab)?;
    Ok(TokenizerInfo {
        vocab: Arc::new(vocab),
    })
}

fn check_stop(stop: &Option<Vec<u32>>) -> PyResult<()> {
    if matches!(stop, Some(s) if s.is_empty()) {
        return Err(PyValueError::new_err(
            "stop_token_ids is empty: give at least one stop token, or None for the tokenizer's own",
        ));
    }
    Ok(())
}

#[pymethods]
impl TokenizerInfo {
    /// Reads a Hugging Face `tokenizer.json` (byte-level BPE, or
    /// SentencePiece BPE with byte fallback). `vocab_size` is the model's
    /// logits width (default: the tokenizer's id count; it may not be
    /// smaller); `stop_token_ids` replaces the stop tokens (default: the
    /// tokenizer's EOS-named added tokens, e.g. Qwen's `<|im_end|>` and
    /// `<|endoftext|>`, and those a `tokenizer_config.json` /
    /// `generation_config.json` beside the file names, as the CLI reads
    /// them).
    #[staticmethod]
    #[pyo3(signature = (path, vocab_size=None, stop_token_ids=None))]
    fn from_tokenizer_json(
        py: Python<'_>,
        path: PathBuf,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<TokenizerInfo> {
        check_stop(&stop_token_ids)?;
        let json = std::fs::read_to_string(&path).map_err(|source| {
            errors::from_vocab(constrain::VocabError::Io {
                path: path.display().to_string(),
                source,
            })
        })?;
        // Stop tokens named by a tokenizer_config.json / generation_config.json
        // beside the file, as the CLI reads them (gpt-oss's <|return|> and
        // <|call|>, Llama 3 Instruct's <|eot_id|>).
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let stops = StopConfig::from_dir(&dir).map_err(errors::from_vocab)?;
        build(py, json, &stops, vocab_size, stop_token_ids)
    }

    /// From a Hugging Face tokenizer: a `transformers` fast tokenizer (its
    /// `backend_tokenizer.to_str()`), a `tokenizers.Tokenizer` (`to_str()`),
    /// or the `tokenizer.json` text itself (str or bytes). Without
    /// `stop_token_ids`, the tokenizer's `eos_token_id` (when it has one) is
    /// added to the EOS-named tokens.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, vocab_size=None, stop_token_ids=None))]
    fn from_huggingface(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<TokenizerInfo> {
        check_stop(&stop_token_ids)?;
        let json: String = if let Ok(s) = tokenizer.cast::<PyString>() {
            s.to_cow()?.into_owned()
        } else if let Ok(b) = tokenizer.cast::<PyBytes>() {
            String::from_utf8(b.as_bytes().to_vec())
                .map_err(|e| PyValueError::new_err(format!("tokenizer JSON is not UTF-8: {e}")))?
        } else if let Ok(backend) = tokenizer.getattr("backend_tokenizer") {
            backend.call_method0("to_str")?.extract()?
        } else if tokenizer.hasattr("to_str")? {
            tokenizer.call_method0("to_str")?.extract()?
        } else {
            return Err(PyTypeError::new_err(format!(
                "from_huggingface takes a transformers fast tokenizer, a tokenizers.Tokenizer \
                 or tokenizer.json text, not {}",
                tokenizer.get_type().name()?
            )));
        };
        let mut info = build(
            py,
            json,
            &StopConfig::default(),
            vocab_size,
            stop_token_ids.clone(),
        )?;
        if stop_token_ids.is_none() {
            let eos: Option<u32> = tokenizer
                .getattr("eos_token_id")
                .ok()
                .and_then(|e| e.extract().ok());
            if let Some(e) = eos.map(TokenId) {
                if !info.vocab.is_eos(e) {
                    let mut stop = info.vocab.eos().to_vec();
                    stop.push(e);
                    let v = (*info.vocab)
                        .clone()
                        .with_eos(stop)
                        .map_err(errors::from_vocab)?;
                    info.vocab = Arc::new(v);
                }
            }
        }
        Ok(info)
    }

    /// The logits width: masks and bitmasks cover this many ids.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.logits_width()
    }

    /// Number of ids the tokenizer knows (text, stop and added tokens).
    #[getter]
    fn num_ids(&self) -> usize {
        self.vocab.num_ids()
    }

    /// The stop token ids (sorted).
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.vocab.eos().iter().map(|t| t.0).collect();
        v.sort_unstable();
        v
    }

    /// The bytes of a token (`None` for stop, added and padding ids).
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> Option<Bound<'py, PyBytes>> {
        let id = u32::try_from(token_id).ok()?;
        self.vocab
            .token_bytes(TokenId(id))
            .map(|b| PyBytes::new(py, b))
    }

    fn __repr__(&self) -> String {
        format!(
            "TokenizerInfo(vocab_size={}, num_ids={}, stop_token_ids={:?})",
            self.vocab.logits_width(),
            self.vocab.num_ids(),
            self.stop_token_ids()
        )
    }
}

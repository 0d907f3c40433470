//! # net: constrain's own Qwen forward pass
//!
//! candle-transformers' `quantized_qwen2` / `quantized_qwen3` models keep
//! their KV cache inside the weights: one sequence per copy of the weights,
//! no way to cut the cache back (speculative decoding, beam search) or to
//! copy it, and no batch of sequences at different positions. A server that
//! decodes several requests then holds one weights copy per slot and runs
//! one matmul per sequence per step.
//!
//! This module splits the two. [`QwenWeights`] is the network, loaded once
//! from GGUF and shared behind an `Arc` by any number of sequences; a
//! [`Sequence`] is one sequence's KV cache and position, a plain value that
//! can be truncated ([`Sequence::truncate`]) and forked
//! ([`Sequence::fork`]). One forward *pass* takes any number of sequences,
//! each with its own chunk of new tokens at its own position, stacks all
//! their rows, and runs every matmul (Q/K/V/O projections, the MLP, the
//! output head) once over the stacked rows with `qmm::Linear`: the
//! weights read once per pass and reused from cache for every row (own
//! AVX-512 VNNI kernels for `Q5_0` / `Q8_0`, candle's `QMatMul` for the
//! other GGUF types). Only attention is per row: each row reads its own
//! sequence's cache up to its own position. Every step of a row (norms,
//! rotary, attention, the matmuls) is computed in the same order whatever
//! else is in the pass, so a row's logits are bitwise the same alone or in
//! a batch. From that one pass come:
//!
//! * [`QwenWeights::forward`]: a chunk of one sequence, logits of its last
//!   token (prefill, jump-forward, decoding);
//! * [`QwenWeights::forward_all`]: a chunk of one sequence, logits after
//!   every token, from the same single pass (speculative verification);
//! * [`QwenWeights::step_batch`]: one token for each of several sequences
//!   at different positions, the logits of each (a server's decode step).
//!
//! The arithmetic is candle's (ported from `quantized_qwen2.rs` and
//! `quantized_qwen3.rs`): RMS norm, biased Q/K/V for Qwen2 or per-head Q/K
//! RMS norms for Qwen3, half-split rotary embedding with f32 tables,
//! grouped-query attention with softmax in f32, SiLU-gated MLP, and the
//! output head tied to the embeddings when `output.weight` is absent. The
//! tests compare its logits with candle's `ModelWeights` on tiny random
//! GGUF files and on the real model.
//!
//! The checks a pass makes before touching any cache (empty chunk, context
//! overflow, token id past the logits) are typed [`ModelError`]s; a candle
//! failure in the middle of a pass cuts every cache back to where it was,
//! so a sequence is never left half-fed.

mod blocks;
mod kernels;
mod kv;
mod pool;
mod q4k;
mod q8;
mod qmm;

pub use kv::Sequence;

use crate::gguf::GgufFile;
use crate::{ModelError, Wanted};
use candle_core::quantized::{gguf_file, QTensor};
use candle_core::Device;
use constrain::vocab::TokenId;
use qmm::{Input, Linear};

/// The model families, from `general.architecture`.
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

/// The shape of the network, from the GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The model family (`general.architecture`).
    pub arch: Architecture,
    /// Width of the hidden state (`embedding_length`).
    pub hidden: usize,
    /// Number of transformer blocks (`block_count`).
    pub layers: usize,
    /// Number of attention query heads.
    pub heads: usize,
    /// Number of key/value heads (grouped-query attention); divides `heads`.
    pub kv_heads: usize,
    /// Size of one attention head (Qwen2: `hidden / heads`; Qwen3:
    /// `attention.key_length`); even.
    pub head_dim: usize,
    /// Maximum sequence length in tokens (`context_length`).
    pub context_length: usize,
    /// Number of logits per position (rows of the output matrix).
    pub logits_width: usize,
    /// Epsilon of the RMS norms (`attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Base frequency of the rotary position embedding (`rope.freq_base`,
    /// default 10000).
    pub rope_base: f32,
}

struct Layer {
    attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    /// Qwen2's Q/K/V biases.
    bias: Option<[Vec<f32>; 3]>,
    /// Qwen3's per-head Q/K norms.
    qk_norm: Option<[Vec<f32>; 2]>,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// The weights of a quantized Qwen2 / Qwen3 network, shared (behind an
/// `Arc`) by every sequence that runs on it.
pub struct QwenWeights {
    cfg: Config,
    /// The token embeddings, dequantized (`logits_width * hidden`).
    embed: Vec<f32>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Linear,
    /// Rotary tables, `context_length * head_dim / 2` each.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl std::fmt::Debug for QwenWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QwenWeights")
            .field("cfg", &self.cfg)
            .finish()
    }
}

fn f32s(t: &QTensor) -> candle_core::Result<Vec<f32>> {
    t.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1::<f32>()
}

impl QwenWeights {
    /// Reads the weights of an opened GGUF file (`qwen2` or `qwen3`).
    pub fn from_gguf(file: &mut GgufFile) -> Result<QwenWeights, ModelError> {
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
        let int = |k: &str| file.integer(&format!("{a}.{k}")).map(|v| v as usize);
        let hidden = int("embedding_length")?;
        let heads = int("attention.head_count")?;
        let kv_heads = int("attention.head_count_kv")?;
        let layers_n = int("block_count")?;
        let context_length = int("context_length")?;
        let head_dim = match arch {
            Architecture::Qwen2 => hidden / heads.max(1),
            Architecture::Qwen3 => int("attention.key_length")?,
        };
        let float = |k: &str| -> Option<f32> {
            file.metadata()
                .get(&format!("{a}.{k}"))
                .and_then(|v| v.to_f32().ok())
        };
        let rms_eps = float("attention.layer_norm_rms_epsilon").ok_or_else(|| {
            file.meta_err(
                &format!("{a}.attention.layer_norm_rms_epsilon"),
                "missing or not a float",
            )
        })?;
        let rope_base = float("rope.freq_base").unwrap_or(10_000.0);
        if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 || head_dim % 2 != 0 {
            return Err(file.meta_err(
                &format!("{a}.attention.head_count_kv"),
                &format!("{heads} heads, {kv_heads} KV heads, head size {head_dim}: heads must be a multiple of KV heads and the head size even"),
            ));
        }
        let content: &gguf_file::Content = &file.content;
        let reader = &mut file.reader;
        let load = |source| ModelError::Load {
            path: shown.clone(),
            source,
        };
        let mut tensor = |name: &str| content.tensor(reader, name, &Device::Cpu).map_err(load);
        let embed_q = tensor("token_embd.weight")?;
        let logits_width = embed_q.shape().dims().first().copied().unwrap_or(0);
        let embed = f32s(&embed_q).map_err(load)?;
        let qmm = |t: QTensor| Linear::new(t).map_err(load);
        let mut layers = Vec::with_capacity(layers_n);
        for l in 0..layers_n {
            let p = format!("blk.{l}");
            let mut t = |n: &str| tensor(&format!("{p}.{n}"));
            let vec = |q: QTensor| f32s(&q).map_err(load);
            let bias = match arch {
                Architecture::Qwen2 => Some([
                    vec(t("attn_q.bias")?)?,
                    vec(t("attn_k.bias")?)?,
                    vec(t("attn_v.bias")?)?,
                ]),
                Architecture::Qwen3 => None,
            };
            let qk_norm = match arch {
                Architecture::Qwen3 => Some([
                    vec(t("attn_q_norm.weight")?)?,
                    vec(t("attn_k_norm.weight")?)?,
                ]),
                Architecture::Qwen2 => None,
            };
            layers.push(Layer {
                attn_norm: vec(t("attn_norm.weight")?)?,
                ffn_norm: vec(t("ffn_norm.weight")?)?,
                wq: qmm(t("attn_q.weight")?)?,
                wk: qmm(t("attn_k.weight")?)?,
                wv: qmm(t("attn_v.weight")?)?,
                wo: qmm(t("attn_output.weight")?)?,
                bias,
                qk_norm,
                gate: qmm(t("ffn_gate.weight")?)?,
                up: qmm(t("ffn_up.weight")?)?,
                down: qmm(t("ffn_down.weight")?)?,
            });
        }
        let norm = f32s(&tensor("output_norm.weight")?).map_err(load)?;
        let output = if content.tensor_infos.contains_key("output.weight") {
            tensor("output.weight")?
        } else {
            embed_q
        };
        let logits_width = output
            .shape()
            .dims()
            .first()
            .copied()
            .unwrap_or(logits_width);
        let output = qmm(output)?;
        // candle's tables: theta_i = base^(-2i/d), angle = pos * theta_i in f32.
        let half = head_dim / 2;
        let theta: Vec<f32> = (0..half)
            .map(|i| 1f32 / rope_base.powf((2 * i) as f32 / head_dim as f32))
            .collect();
        let mut cos = Vec::with_capacity(context_length * half);
        let mut sin = Vec::with_capacity(context_length * half);
        for p in 0..context_length {
            for t in &theta {
                let a = p as f32 * t;
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        crate::mark_pools_used();
        Ok(QwenWeights {
            cfg: Config {
                arch,
                hidden,
                layers: layers_n,
                heads,
                kv_heads,
                head_dim,
                context_length,
                logits_width,
                rms_eps,
                rope_base,
            },
            embed,
            layers,
            norm,
            output,
            cos,
            sin,
        })
    }

    /// The network's shape.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// A new, empty sequence for these weights.
    pub fn sequence(&self) -> Sequence {
        Sequence::new(self.cfg.layers, self.cfg.kv_heads * self.cfg.head_dim)
    }

    /// Feeds `tokens` after what `seq` holds; the logits after the last.
    pub fn forward(&self, seq: &mut Sequence, tokens: &[TokenId]) -> Result<Vec<f32>, ModelError> {
        let mut rows = self.pass(&mut [seq], &[tokens], false)?;
        Ok(rows.pop().unwrap_or_default())
    }

    /// [`Self::forward`] computing, where the output head allows it, only
    /// the logits `wanted` names ([`crate::LanguageModel::forward_masked`]):
    /// the `Q8_0` head's tiles of 16 columns that hold a wanted id, when
    /// they are at most half of its tiles; the rest stay `-inf`.
    /// `CONSTRAIN_FULL_HEAD=1` (read once) always computes the whole head.
    pub fn forward_masked(
        &self,
        seq: &mut Sequence,
        tokens: &[TokenId],
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        let mut rows = self.pass_with(&mut [seq], &[tokens], false, Some(wanted))?;
        Ok(rows.pop().unwrap_or_default())
    }

    /// Feeds `tokens` after what `seq` holds, in one pass; the logits after
    /// each of them (one row per token).
    pub fn forward_all(
        &self,
        seq: &mut Sequence,
        tokens: &[TokenId],
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        self.pass(&mut [seq], &[tokens], true)
    }

    /// One decoding step over several sequences at once: `tokens[i]` is
    /// fed to `seqs[i]` at its own position; one pass, the matmuls over all
    /// rows together. Returns each sequence's logits.
    pub fn step_batch(
        &self,
        seqs: &mut [&mut Sequence],
        tokens: &[TokenId],
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        crate::check_step_width(seqs.len(), tokens)?;
        let chunks: Vec<&[TokenId]> = tokens.iter().map(std::slice::from_ref).collect();
        self.pass(seqs, &chunks, false)
    }

    /// Feeds `chunks[i]` to `seqs[i]`, all in one pass; the logits of each
    /// chunk's last token, or (`all`) of every token, sequence after
    /// sequence.
    pub fn pass(
        &self,
        seqs: &mut [&mut Sequence],
        chunks: &[&[TokenId]],
        all: bool,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        self.pass_with(seqs, chunks, all, None)
    }

    /// [`Self::pass`], where `wanted` (called once, before the output head)
    /// may narrow the head for every row of logits: it names the union of
    /// what each row's caller will read ([`Self::forward_masked`]).
    pub(crate) fn pass_with(
        &self,
        seqs: &mut [&mut Sequence],
        chunks: &[&[TokenId]],
        all: bool,
        wanted: Option<Wanted<'_>>,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let c = &self.cfg;
        if seqs.len() != chunks.len() {
            return Err(ModelError::Batch(format!(
                "{} sequences but {} chunks",
                seqs.len(),
                chunks.len()
            )));
        }
        if seqs.is_empty() || chunks.iter().any(|t| t.is_empty()) {
            return Err(ModelError::EmptyBatch);
        }
        for (s, t) in seqs.iter().zip(chunks) {
            if s.layers.len() != c.layers || s.kv_dim != c.kv_heads * c.head_dim {
                return Err(ModelError::Batch(
                    "a sequence was made for other weights".into(),
                ));
            }
            let needed = s.len + t.len();
            if needed > c.context_length {
                return Err(ModelError::ContextOverflow {
                    needed,
                    context: c.context_length,
                });
            }
            // A token needs a logit and an embedding row (a file whose
            // `output.weight` has more rows than `token_embd` has ids past
            // the embeddings).
            let width = c.logits_width.min(self.embed.len() / c.hidden.max(1));
            if let Some(&tok) = t.iter().find(|t| t.as_usize() >= width) {
                return Err(ModelError::TokenOutOfRange { token: tok, width });
            }
        }
        let starts: Vec<usize> = seqs.iter().map(|s| s.len).collect();
        match self.run(seqs, chunks, all, wanted) {
            Ok(rows) => {
                for (s, t) in seqs.iter_mut().zip(chunks) {
                    s.len += t.len();
                }
                Ok(rows)
            }
            Err(source) => {
                for (s, &st) in seqs.iter_mut().zip(&starts) {
                    s.cut(st);
                }
                Err(ModelError::Forward {
                    pos: starts[0],
                    source,
                })
            }
        }
    }

    /// The pass itself (inputs checked).
    fn run(
        &self,
        seqs: &mut [&mut Sequence],
        chunks: &[&[TokenId]],
        all: bool,
        wanted: Option<Wanted<'_>>,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let c = &self.cfg;
        let (h, hd) = (c.hidden, c.head_dim);
        let q_dim = c.heads * hd;
        let kv_dim = c.kv_heads * hd;
        let half = hd / 2;
        // Row r: (sequence, position).
        let mut meta: Vec<(usize, usize)> = Vec::new();
        for (i, t) in chunks.iter().enumerate() {
            meta.extend((0..t.len()).map(|j| (i, seqs[i].len + j)));
        }
        let rows = meta.len();
        let mut x: Vec<f32> = Vec::with_capacity(rows * h);
        for t in chunks.iter().flat_map(|t| t.iter()) {
            let at = t.as_usize() * h;
            x.extend_from_slice(&self.embed[at..at + h]);
        }
        for (l, layer) in self.layers.iter().enumerate() {
            let xn = kernels::rms_norm(&x, &layer.attn_norm, c.rms_eps);
            let xin = Input::new(&xn, h)?;
            let mut q = layer.wq.forward_input(&xin)?;
            let mut k = layer.wk.forward_input(&xin)?;
            let mut v = layer.wv.forward_input(&xin)?;
            if let Some([bq, bk, bv]) = &layer.bias {
                add_rows(&mut q, bq);
                add_rows(&mut k, bk);
                add_rows(&mut v, bv);
            }
            if let Some([nq, nk]) = &layer.qk_norm {
                kernels::rms_norm_in_place(&mut q, nq, c.rms_eps);
                kernels::rms_norm_in_place(&mut k, nk, c.rms_eps);
            }
            for (r, &(_, pos)) in meta.iter().enumerate() {
                let (cos, sin) = (
                    &self.cos[pos * half..(pos + 1) * half],
                    &self.sin[pos * half..(pos + 1) * half],
                );
                kernels::rope_in_place(&mut q[r * q_dim..(r + 1) * q_dim], hd, cos, sin);
                kernels::rope_in_place(&mut k[r * kv_dim..(r + 1) * kv_dim], hd, cos, sin);
            }
            for (r, &(s, _)) in meta.iter().enumerate() {
                let kv = &mut seqs[s].layers[l];
                kv.k.extend_from_slice(&k[r * kv_dim..(r + 1) * kv_dim]);
                kv.v.extend_from_slice(&v[r * kv_dim..(r + 1) * kv_dim]);
            }
            let mut att = vec![0f32; rows * q_dim];
            {
                let caches: Vec<(&[f32], &[f32])> = seqs
                    .iter()
                    .map(|s| (s.layers[l].k.as_slice(), s.layers[l].v.as_slice()))
                    .collect();
                let one = |r: usize, out: &mut [f32]| {
                    let (s, pos) = meta[r];
                    let (kc, vc) = caches[s];
                    kernels::attend(
                        &q[r * q_dim..(r + 1) * q_dim],
                        kc,
                        vc,
                        pos,
                        c.heads,
                        c.kv_heads,
                        hd,
                        out,
                    );
                };
                pool::for_rows_mut(&mut att, q_dim, one);
            }
            let o = layer.wo.forward(&att)?;
            add_in_place(&mut x, &o);
            let xn = kernels::rms_norm(&x, &layer.ffn_norm, c.rms_eps);
            let xin = Input::new(&xn, h)?;
            let mut g = layer.gate.forward_input(&xin)?;
            let u = layer.up.forward_input(&xin)?;
            kernels::silu_mul(&mut g, &u);
            let d = layer.down.forward(&g)?;
            add_in_place(&mut x, &d);
        }
        // The rows whose logits are wanted.
        let mut pick: Vec<usize> = Vec::new();
        let mut r = 0;
        for t in chunks {
            if all {
                pick.extend(r..r + t.len());
            } else {
                pick.push(r + t.len() - 1);
            }
            r += t.len();
        }
        let mut last = Vec::with_capacity(pick.len() * h);
        for &r in &pick {
            last.extend_from_slice(&x[r * h..(r + 1) * h]);
        }
        let xn = kernels::rms_norm(&last, &self.norm, c.rms_eps);
        let masked = match wanted {
            Some(wanted) if !full_head() => {
                wanted().and_then(|w| self.output.forward_masked(&xn, &w))
            }
            _ => None,
        };
        let logits = match masked {
            Some(l) => l,
            None => self.output.forward(&xn)?,
        };
        let w = self.output.out_dim();
        Ok(logits.chunks_exact(w).map(<[f32]>::to_vec).collect())
    }
}

/// `CONSTRAIN_FULL_HEAD=1` (read once): the output head is never narrowed.
fn full_head() -> bool {
    static FULL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FULL.get_or_init(|| std::env::var("CONSTRAIN_FULL_HEAD").is_ok_and(|v| v == "1"))
}

fn add_rows(x: &mut [f32], b: &[f32]) {
    for row in x.chunks_exact_mut(b.len()) {
        for (v, b) in row.iter_mut().zip(b) {
            *v += b;
        }
    }
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

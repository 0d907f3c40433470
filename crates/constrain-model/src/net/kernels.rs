//! The small f32 kernels of the forward pass that are not matmuls: RMS norm,
//! rotary embedding, SiLU gating and causal attention over one sequence's KV
//! cache. They work on plain slices so that each row of a batch can carry its
//! own sequence and position; the matmuls are in [`super::qmm`].

/// Sum of products, with eight independent accumulators so that the compiler
/// can vectorize it without reassociating one long chain.
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let chunks = n / 8;
    for c in 0..chunks {
        let (x, y) = (&a[c * 8..c * 8 + 8], &b[c * 8..c * 8 + 8]);
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = 0f32;
    for i in chunks * 8..n {
        s += a[i] * b[i];
    }
    acc.iter().sum::<f32>() + s
}

/// `out = x / sqrt(mean(x²) + eps) * w`, row by row (`x.len()` a multiple of
/// `w.len()`).
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let d = w.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let ss: f32 = row.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let k = 1.0 / (ss + eps).sqrt();
        out.extend(row.iter().zip(w).map(|(v, w)| v * k * w));
    }
    out
}

/// RMS norm in place over every `w.len()` chunk (Qwen3's per-head Q/K norm).
pub(crate) fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let d = w.len();
    for row in x.chunks_exact_mut(d) {
        let ss: f32 = row.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let k = 1.0 / (ss + eps).sqrt();
        for (v, w) in row.iter_mut().zip(w) {
            *v = *v * k * w;
        }
    }
}

/// Rotary embedding (the "half split" layout of Qwen/Llama in candle's
/// `rope`) in place over every head of one row: `cos`/`sin` are the
/// `head_dim / 2` values of the row's position.
pub(crate) fn rope_in_place(x: &mut [f32], head_dim: usize, cos: &[f32], sin: &[f32]) {
    let half = head_dim / 2;
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let (x1, x2) = (head[i], head[i + half]);
            head[i] = x1 * cos[i] - x2 * sin[i];
            head[i + half] = x1 * sin[i] + x2 * cos[i];
        }
    }
}

/// `silu(gate) * up`, element-wise, into `gate`.
pub(crate) fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        let s = *g / (1.0 + (-*g).exp());
        *g = s * u;
    }
}

/// Causal attention of one query row (`n_head * head_dim` values) at
/// position `pos` over the first `pos + 1` entries of a KV cache laid out as
/// `[position][kv_head][head_dim]`; grouped-query heads share a KV head.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    pos: usize,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    out: &mut [f32],
) {
    let kv_dim = n_kv_head * head_dim;
    let group = n_head / n_kv_head;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let mut scores = vec![0f32; pos + 1];
    for h in 0..n_head {
        let kvh = h / group;
        let qh = &q[h * head_dim..(h + 1) * head_dim];
        let mut max = f32::NEG_INFINITY;
        for (j, s) in scores.iter_mut().enumerate() {
            let kj = &k[j * kv_dim + kvh * head_dim..j * kv_dim + (kvh + 1) * head_dim];
            *s = dot(qh, kj) * scale;
            max = max.max(*s);
        }
        let mut sum = 0f32;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        let oh = &mut out[h * head_dim..(h + 1) * head_dim];
        oh.fill(0.0);
        for (j, s) in scores.iter().enumerate() {
            let p = s / sum;
            let vj = &v[j * kv_dim + kvh * head_dim..j * kv_dim + (kvh + 1) * head_dim];
            for (o, x) in oh.iter_mut().zip(vj) {
                *o += p * x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.25).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
    }

    #[test]
    fn attention_over_one_position_returns_its_value() {
        // One position: softmax weight 1, the output is V (per KV group).
        let (q, k, v) = (vec![1.0, 2.0, 3.0, 4.0], vec![0.5, -1.0], vec![7.0, 9.0]);
        let mut out = vec![0.0; 4];
        attend(&q, &k, &v, 0, 2, 1, 2, &mut out);
        assert_eq!(out, vec![7.0, 9.0, 7.0, 9.0]);
    }

    #[test]
    fn attention_weights_follow_the_scores() {
        // head_dim 1, two positions with keys 0 and ln(3)*1: weights 1/4, 3/4.
        let q = vec![1.0];
        let k = vec![0.0, 3f32.ln()];
        let v = vec![4.0, 8.0];
        let mut out = vec![0.0];
        attend(&q, &k, &v, 1, 1, 1, 1, &mut out);
        assert!((out[0] - 7.0).abs() < 1e-5, "{out:?}");
        // At position 0 the second key is not seen.
        attend(&q, &k, &v, 0, 1, 1, 1, &mut out);
        assert_eq!(out[0], 4.0);
    }

    #[test]
    fn rope_at_position_zero_is_the_identity_and_keeps_norms() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        rope_in_place(&mut x, 4, &[1.0, 1.0], &[0.0, 0.0]);
        assert_eq!(x, vec![1.0, 2.0, 3.0, 4.0]);
        let (c, s) = (0.3f32.cos(), 0.3f32.sin());
        rope_in_place(&mut x, 4, &[c, 1.0], &[s, 0.0]);
        let n: f32 = x.iter().map(|v| v * v).sum();
        assert!((n - 30.0).abs() < 1e-4);
        assert!((x[0] - (c - 3.0 * s)).abs() < 1e-6);
    }

    #[test]
    fn rms_norm_scales_rows_to_unit_rms() {
        let y = rms_norm(&[3.0, 4.0, 0.0, 2.0], &[1.0, 1.0], 0.0);
        let rms = (12.5f32).sqrt();
        assert!((y[0] - 3.0 / rms).abs() < 1e-6 && (y[3] - 2.0f32.sqrt()).abs() < 1e-6);
    }
}

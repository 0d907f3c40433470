//! The survivors of the pipeline ("candidates") and the filters over them.
//!
//! Both the [`Sampler`](super::Sampler) and the slice-level stages
//! ([`top_k`](super::top_k), [`top_p`](super::top_p), ...) run the filters
//! through this one implementation, so the fast path and the explainer cannot
//! drift apart.
//!
//! Invariants: `ids` is strictly ascending (position order is id order, so
//! "lowest position" breaks ties as "lowest id" does); no logit is NaN or
//! `-inf` once [`Candidates::retain_live`] or a gather has run; `weights`
//! is meaningful only after [`Candidates::compute_weights`] (and is then kept
//! in step by every removal).
//!
//! The total order used by every ranking filter: higher logit first, then lower
//! id. `==` on floats, so `-0.0` and `+0.0` tie.

use super::fastexp::exp_nonpositive;
use std::cmp::Ordering;

/// Below this many candidates top-p sorts them all; above it, it buckets.
const SMALL: usize = 256;
/// Top-p buckets per unit of (shifted, scaled) logit, and how many units they span.
const BINS_PER_UNIT: f32 = 32.0;
const BINS: usize = 32 * 32;

/// Ranks `(logit, position)` pairs: higher logit first, then lower position.
#[inline]
pub(crate) fn rank(a: &(f32, u32), b: &(f32, u32)) -> Ordering {
    if a.0 > b.0 {
        Ordering::Less
    } else if a.0 < b.0 {
        Ordering::Greater
    } else {
        a.1.cmp(&b.1)
    }
}

/// Leaves in `buf` the `k` highest-ranked live (not NaN, not `-inf`) entries of
/// `values` as `(value, position)`, sorted by position. Never sorts the whole
/// slice: one scan that skips 64-wide chunks with nothing above the running
/// threshold, and a selection whenever the buffer fills.
pub(crate) fn top_k_select(values: &[f32], k: usize, buf: &mut Vec<(f32, u32)>) {
    buf.clear();
    if k == 0 {
        return;
    }
    const CHUNK: usize = 64;
    // A small buffer makes the threshold rise early, so later chunks are skipped.
    let cap = (4 * k).max(256);
    let mut threshold = f32::NEG_INFINITY;
    let mut chunks = values.chunks_exact(CHUNK);
    for (ci, chunk) in chunks.by_ref().enumerate() {
        let chunk: &[f32; CHUNK] = chunk.try_into().expect("exact chunk");
        let mut bits = 0u64;
        for (j, &x) in chunk.iter().enumerate() {
            bits |= ((x > threshold) as u64) << j;
        }
        if bits == 0 {
            continue;
        }
        let base = ci * CHUNK;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            buf.push((chunk[j], (base + j) as u32));
        }
        if buf.len() >= cap {
            buf.select_nth_unstable_by(k - 1, rank);
            buf.truncate(k);
            // Later positions lose ties, so only strictly larger values can enter.
            threshold = buf[k - 1].0;
        }
    }
    let base = values.len() - chunks.remainder().len();
    for (j, &x) in chunks.remainder().iter().enumerate() {
        if x > threshold {
            buf.push((x, (base + j) as u32));
        }
    }
    if buf.len() > k {
        buf.select_nth_unstable_by(k - 1, rank);
        buf.truncate(k);
    }
    buf.sort_unstable_by_key(|&(_, p)| p);
}

/// The surviving tokens: ids, their current logits and (later) weights.
#[derive(Clone, Debug, Default)]
pub(crate) struct Candidates {
    pub ids: Vec<u32>,
    pub logits: Vec<f32>,
    pub weights: Vec<f32>,
    weighted: bool,
    sel: Vec<(f32, u32)>,
    order: Vec<(f32, u32)>,
    hist: Vec<f64>,
}

impl Candidates {
    pub fn clear(&mut self) {
        self.ids.clear();
        self.logits.clear();
        self.weights.clear();
        self.weighted = false;
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Every live entry of `logits` (not NaN, not `-inf`), in id order.
    pub fn gather_live(&mut self, logits: &[f32]) {
        self.clear();
        let mut dead = 0u32;
        for &x in logits {
            dead |= (x.is_nan() | (x == f32::NEG_INFINITY)) as u32;
        }
        if dead == 0 {
            // Nothing removed (the common unmasked case): a straight copy.
            self.ids.extend(0..logits.len() as u32);
            self.logits.extend_from_slice(logits);
            return;
        }
        for (i, &x) in logits.iter().enumerate() {
            if x > f32::NEG_INFINITY {
                self.ids.push(i as u32);
                self.logits.push(x);
            }
        }
    }

    /// The entries of `logits` whose bit is set in `words` (a bitset, bit `i`
    /// of word `i / 64`), raw (NaN and `-inf` included), in id order. Ids at or
    /// past `logits.len()` are ignored.
    pub fn gather_bits(&mut self, logits: &[f32], words: &[u64]) {
        self.clear();
        const BLOCK: usize = 8;
        let n = logits.len();
        for (bi, block) in words.chunks(BLOCK).enumerate() {
            // Masks are mostly zero words: skip eight at a time.
            if block.iter().fold(0, |a, &w| a | w) == 0 {
                continue;
            }
            for (j, &w) in block.iter().enumerate() {
                let base = (bi * BLOCK + j) * 64;
                let mut w = w;
                while w != 0 {
                    let i = base + w.trailing_zeros() as usize;
                    w &= w - 1;
                    if i >= n {
                        return;
                    }
                    self.ids.push(i as u32);
                    self.logits.push(logits[i]);
                }
            }
        }
    }

    /// Applies `f(logit, value)` to the candidates named in `sorted` (ascending
    /// ids; ids that are not candidates are skipped), by a merge.
    pub fn merge_apply<V: Copy>(&mut self, sorted: &[(u32, V)], f: impl Fn(f32, V) -> f32) {
        let mut i = 0;
        for &(id, v) in sorted {
            while i < self.ids.len() && self.ids[i] < id {
                i += 1;
            }
            if i == self.ids.len() {
                return;
            }
            if self.ids[i] == id {
                self.logits[i] = f(self.logits[i], v);
            }
        }
    }

    /// Position of token `id`, if it is a candidate.
    #[inline]
    pub fn position(&self, id: u32) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    /// Keeps the entries for which `keep(logit, weight, id)` holds, in order.
    fn retain(&mut self, mut keep: impl FnMut(f32, f32, u32) -> bool) {
        let weighted = self.weighted;
        let mut j = 0;
        for i in 0..self.ids.len() {
            let w = if weighted { self.weights[i] } else { 0.0 };
            if keep(self.logits[i], w, self.ids[i]) {
                self.ids[j] = self.ids[i];
                self.logits[j] = self.logits[i];
                if weighted {
                    self.weights[j] = w;
                }
                j += 1;
            }
        }
        self.ids.truncate(j);
        self.logits.truncate(j);
        if weighted {
            self.weights.truncate(j);
        }
    }

    /// Drops NaN and `-inf` entries (removed tokens).
    pub fn retain_live(&mut self) {
        self.retain(|x, _, _| x > f32::NEG_INFINITY);
    }

    /// `+inf` means certain: if any candidate has it, only those survive, as a
    /// uniform distribution (logit 0 each).
    pub fn resolve_infinite(&mut self) {
        if self.logits.contains(&f32::INFINITY) {
            self.retain(|x, _, _| x == f32::INFINITY);
            self.logits.fill(0.0);
        }
    }

    /// The best-ranked candidate (highest logit, lowest id), if any.
    pub fn argmax(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, &x) in self.logits.iter().enumerate() {
            let better = match best {
                None => true,
                Some(b) => x > self.logits[b],
            };
            if better {
                best = Some(i);
            }
        }
        best
    }

    /// Replaces the candidates by the `k` best-ranked live entries of a whole
    /// logits slice (position = id).
    pub fn select_top_k_from(&mut self, logits: &[f32], k: usize) {
        self.clear();
        top_k_select(logits, k, &mut self.sel);
        for &(x, p) in &self.sel {
            self.ids.push(p);
            self.logits.push(x);
        }
    }

    /// Keeps the `k` best-ranked candidates (`k = 0`: no-op, as "off").
    pub fn top_k(&mut self, k: usize) {
        if k == 0 || k >= self.len() {
            return;
        }
        top_k_select(&self.logits, k, &mut self.sel);
        // `sel` is ascending in position, so writing slot j from position >= j is safe.
        for (j, &(x, p)) in self.sel.iter().enumerate() {
            let p = p as usize;
            self.ids[j] = self.ids[p];
            self.logits[j] = x;
            if self.weighted {
                self.weights[j] = self.weights[p];
            }
        }
        self.ids.truncate(k);
        self.logits.truncate(k);
        if self.weighted {
            self.weights.truncate(k);
        }
    }

    /// Logits become `(x - max) / t` (`t > 0`, no NaN or `+inf` present): the
    /// distribution of `x / t`, shifted so the best logit is exactly 0 and no
    /// small temperature can overflow. Entries that underflow to `-inf` go.
    pub fn shift_and_scale(&mut self, t: f32) {
        let Some(b) = self.argmax() else { return };
        let m = self.logits[b];
        let mut underflow = 0u32;
        if t == 1.0 {
            for x in &mut self.logits {
                *x -= m;
                underflow |= (*x == f32::NEG_INFINITY) as u32;
            }
        } else {
            for x in &mut self.logits {
                *x = (*x - m) / t;
                underflow |= (*x == f32::NEG_INFINITY) as u32;
            }
        }
        self.weighted = false;
        if underflow != 0 {
            self.retain_live();
        }
    }

    /// `weights = exp(logits)`; expects [`shift_and_scale`](Self::shift_and_scale)
    /// first, so the best weight is exactly 1.
    pub fn compute_weights(&mut self) {
        self.weights.clear();
        self.weights
            .extend(self.logits.iter().map(|&x| exp_nonpositive(x)));
        self.weighted = true;
    }

    /// Sum of the weights (f64, id order).
    pub fn total(&self) -> f64 {
        self.weights.iter().map(|&w| w as f64).sum()
    }

    /// Top-p over weighted candidates: keeps the smallest prefix, in rank order,
    /// whose weight reaches `p` of the total (always at least the top token).
    /// A threshold search, not a full sort: few candidates are sorted; many are
    /// bucketed by logit and only the bucket holding the cut is sorted.
    pub fn top_p(&mut self, p: f32) {
        debug_assert!(self.weighted);
        let n = self.len();
        if p >= 1.0 || n <= 1 {
            return;
        }
        let p = p as f64;
        let mut cut: Option<(f32, u32)> = None;
        if n <= SMALL {
            self.order.clear();
            self.order
                .extend((0..n).map(|i| (self.logits[i], i as u32)));
            self.order.sort_unstable_by(rank);
            let total: f64 = self
                .order
                .iter()
                .map(|&(_, i)| self.weights[i as usize] as f64)
                .sum();
            let target = p * total;
            let mut cum = 0.0f64;
            for &(x, i) in &self.order {
                cum += self.weights[i as usize] as f64;
                if cum >= target {
                    cut = Some((x, i));
                    break;
                }
            }
        } else {
            // x <= 0 here; the last bin catches everything past the range.
            let bin = |x: f32| -> usize { (-x * BINS_PER_UNIT).min(BINS as f32) as usize };
            self.hist.clear();
            self.hist.resize(BINS + 1, 0.0);
            let hist = &mut self.hist[..BINS + 1];
            for (&x, &w) in self.logits.iter().zip(&self.weights) {
                hist[bin(x).min(BINS)] += w as f64;
            }
            let total: f64 = self.hist.iter().sum();
            let target = p * total;
            let mut before = 0.0f64;
            let mut boundary = None;
            for (b, &h) in self.hist.iter().enumerate() {
                if before + h >= target {
                    boundary = Some(b);
                    break;
                }
                before += h;
            }
            if let Some(b) = boundary {
                self.order.clear();
                for i in 0..n {
                    if bin(self.logits[i]) == b {
                        self.order.push((self.logits[i], i as u32));
                    }
                }
                self.order.sort_unstable_by(rank);
                let mut cum = before;
                for &(x, i) in &self.order {
                    cum += self.weights[i as usize] as f64;
                    if cum >= target {
                        cut = Some((x, i));
                        break;
                    }
                }
                if cut.is_none() {
                    // Rounding left the bucket a hair short: keep all of it.
                    cut = self.order.last().copied();
                }
            }
        }
        // No cut found means rounding kept the total a hair short: keep everything.
        if let Some((lx, lpos)) = cut {
            let lid = self.ids[lpos as usize];
            self.retain(|x, _, id| x > lx || (x == lx && id <= lid));
        }
    }

    /// Min-p over weighted candidates: keeps `p_i >= min_p · p_max`. The best
    /// weight is 1 after [`shift_and_scale`](Self::shift_and_scale), so the bar
    /// is `weight >= min_p`.
    pub fn min_p(&mut self, min_p: f32) {
        debug_assert!(self.weighted);
        if min_p <= 0.0 {
            return;
        }
        let wmax = self.weights.iter().fold(0.0f32, |a, &w| a.max(w));
        let bar = min_p * wmax;
        self.retain(|_, w, _| w >= bar);
    }

    /// The position drawn by a uniform `u` in `[0, 1)`: walks the cumulative
    /// weights in id order. Zero-weight candidates are never drawn.
    pub fn draw(&self, u: f64) -> Option<usize> {
        let total = self.total();
        if total.is_nan() || total <= 0.0 {
            return None;
        }
        let x = u * total;
        let mut cum = 0.0f64;
        let mut last = None;
        for (i, &w) in self.weights.iter().enumerate() {
            if w > 0.0 {
                cum += w as f64;
                last = Some(i);
                if cum > x {
                    return Some(i);
                }
            }
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_top_k(values: &[f32], k: usize) -> Vec<u32> {
        let mut v: Vec<(f32, u32)> = values
            .iter()
            .enumerate()
            .filter(|(_, &x)| x > f32::NEG_INFINITY)
            .map(|(i, &x)| (x, i as u32))
            .collect();
        v.sort_by(rank);
        v.truncate(k);
        let mut ids: Vec<u32> = v.into_iter().map(|(_, i)| i).collect();
        ids.sort();
        ids
    }

    #[test]
    fn top_k_select_agrees_with_sorting_including_ties_and_nan() {
        let mut state = 12345u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..200 {
            let n = 1 + (next() % 5000) as usize;
            let values: Vec<f32> = (0..n)
                .map(|_| match next() % 20 {
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    2 if round % 3 == 0 => f32::INFINITY,
                    _ => (next() % 50) as f32 * 0.25, // many ties
                })
                .collect();
            for k in [1, 2, 7, 50, 600, 3000] {
                let mut buf = Vec::new();
                top_k_select(&values, k, &mut buf);
                let got: Vec<u32> = buf.iter().map(|&(_, p)| p).collect();
                assert_eq!(got, reference_top_k(&values, k), "n={n} k={k}");
            }
        }
    }

    #[test]
    fn top_p_bucketed_path_matches_sorting() {
        // Many candidates force the bucketed path; compare with a plain sort.
        let n = 5000;
        let logits: Vec<f32> = (0..n).map(|i| -((i * 7919 % n) as f32) / 700.0).collect();
        for p in [0.05f32, 0.3, 0.5, 0.9, 0.99, 0.999_999] {
            let mut c = Candidates::default();
            c.gather_live(&logits);
            c.shift_and_scale(1.0);
            c.compute_weights();
            let weights = c.weights.clone();
            c.top_p(p);
            let mut order: Vec<(f32, u32)> = (0..n).map(|i| (logits[i], i as u32)).collect();
            order.sort_by(rank);
            let total: f64 = weights.iter().map(|&w| w as f64).sum();
            let mut cum = 0.0;
            let mut want = Vec::new();
            for &(_, i) in &order {
                want.push(i);
                cum += weights[i as usize] as f64;
                if cum >= p as f64 * total {
                    break;
                }
            }
            want.sort();
            assert_eq!(c.ids, want, "p={p}");
        }
    }
}

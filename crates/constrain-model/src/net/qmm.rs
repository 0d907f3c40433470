//! # qmm: the quantized matmul of the forward pass, weights read once per pass
//!
//! Every projection of the network is `y = x · Wᵀ` with `x` a few rows of
//! f32 activations (one per token of the pass) and `W` a GGUF weight of
//! `n` output columns by `k` inputs. On a memory-bound CPU the cost of a
//! decode step is reading `W`; a pass over several rows (a batch of
//! sequences, or the K+1 positions of speculative verification) should read
//! it once, not once per row, and should not unpack its quantized blocks
//! once per row either.
//!
//! [`Linear`] is one such weight. For the GGUF types the Qwen2.5-Coder
//! Q4_K_M files are made of, it keeps the weight in its own layout (built
//! once at load, replacing candle's copy: the model stays in one copy):
//!
//! * `Q5_0` and `Q8_0` (most of the 0.5B: attention, gate/up, the output
//!   head): columns in tiles of 16, each 32-value block of a tile stored so
//!   that one 512-bit register holds 4 inputs of 16 columns. The kernel
//!   walks weights outer, rows inner: for each tile (rayon-like chunks on
//!   the own pool, `net::pool`), for each block, the block is loaded and unpacked
//!   once into registers, then every row of the pass takes its dot products
//!   against it with AVX-512 VNNI (`vpdpbusd`). `Q8_0` (the output head)
//!   has its own module, `net::q8`.
//! * `Q6_K` (the 0.5B's and 1.5B's `ffn_down` half the layers, the 1.5B's
//!   output head): the same tiles over 256-value superblocks, 16-value
//!   sub-blocks unpacked once from the compact 6-bit form (210 bytes per
//!   column and superblock, as in the file).
//! * `F32` (the tiny test files): plain dot products, one order per row.
//! * `Q4_K` (the 0.5B's `ffn_down` in the other half of the layers, most
//!   of the 1.5B): candle's own repacked kernel, ported (`net::q4k`), so
//!   that it runs on the own pool too.
//! * anything else (`F16`, ...) or a CPU without AVX-512 VNNI: candle's
//!   `QMatMul`.
//!
//! The rows a pass feeds to several weights (Q, K and V read the same
//! normed rows, so do gate and up) are quantized once per form, by the
//! first weight that needs them ([`Input`]). Where the weights sit in a
//! large last-level cache (the 0.5B fits the L3 the 2-core VM of the
//! figures reports, 480 MiB), a pass is compute-bound: what grows with the
//! rows (their quantization, their `vpdpbusd` and f32 work against each
//! unpacked block) is what a batched pass pays per row, and what the
//! kernels keep small.
//!
//! ## Invariant: a row's result does not depend on the other rows
//!
//! Each output is computed by the same sequence of operations whatever the
//! number of rows in the pass and wherever the row sits in it; so the
//! logits of a token are bitwise the same in a one-token step, in a batch
//! of sequences, and in a pass over K+1 positions (what makes speculative
//! greedy decoding give exactly the target model's text). The own kernels
//! go further and reproduce candle's one-row arithmetic exactly: the input
//! rows are quantized with candle's own `from_float`, the integer part of
//! each block's dot product is exact, and the f32 part repeats candle's
//! operations in candle's order (`Q5_0`: its scalar `vec_dot`, block after
//! block; `Q8_0`: its scalar `vec_dot_unopt`, the same form, where candle's
//! own `QMatMul` takes an AVX2 `vec_dot` with eight lanes, last bits
//! apart), lane-wise over 16 columns. The tests compare them bitwise with
//! those functions.
//!
//! candle's own path is not row-independent for `Q6_K`: one row takes the
//! compact AVX2 `vec_dot`, several rows a repacked VNNI kernel with another
//! order of additions (and a second copy of the weight). The own `Q6_K`
//! kernel repeats the several-row arithmetic for every number of rows, on
//! the compact layout; where it does not apply (no VNNI, odd shapes), a
//! one-row `Q6_K` matmul runs through candle as a two-row one (the row and
//! zeros) so that it takes the same kernel as several rows.

pub(crate) use super::blocks::RawQ8K;
use super::blocks::{act, Act};
use super::q8::TileQ8_0;
use candle_core::quantized::k_quants::{BlockQ8K, BlockQ8_0, GgmlType};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use std::cell::OnceCell;

/// Columns per tile: one 512-bit register of f32 or of 4-byte groups.
const TILE: usize = 16;
/// Values per `Q5_0` / `Q8_0` block.
const QK: usize = 32;
/// Values per K-quant superblock.
const QK_K: usize = 256;
/// Rows that share one unpacked block in registers (`Q5_0`, `Q6_K`: one
/// accumulator a row, so a prompt's rows take the unpacking 8 at a time).
const ROWS: usize = 8;

/// 16 columns × one 32-value `Q5_0` block. `qs[p]` holds, for column `c`
/// at bytes `4c..4c+4`, the low 4 bits of inputs `4p..4p+4` (low nibbles)
/// and `4(p+4)..4(p+4)+4` (high nibbles); bit `4c + j` of `qh[g]` is the
/// fifth bit of input `4g + j` of column `c`.
#[repr(C, align(64))]
#[derive(Clone)]
struct TileQ5_0 {
    qs: [[u8; 64]; 4],
    qh: [u64; 8],
    d: [u16; TILE],
}

enum Kind {
    Q5_0(Vec<TileQ5_0>),
    Q8_0(Vec<TileQ8_0>),
    Q6K(Vec<TileQ6K>),
    /// candle's repacked `Q4_K` kernel, on the own pool (`net::q4k`).
    Q4K(Vec<super::q4k::TileQ4K>),
    /// Row-major `n × k`.
    F32(Vec<f32>),
    Candle {
        mm: QMatMul,
        /// Run one row as two (see the module docs).
        pad_one_row: bool,
    },
}

/// One weight matrix (`n` outputs by `k` inputs) and its matmul.
pub(crate) struct Linear {
    n: usize,
    k: usize,
    kind: Kind,
}

/// Whether this CPU runs the own kernels (AVX-512 with VNNI).
fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OK.get_or_init(|| {
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
                && is_x86_feature_detected!("f16c")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl Linear {
    /// Takes a GGUF weight of shape `(n, k)`. The environment variable
    /// `CONSTRAIN_KERNELS=candle` (read once) turns the own kernels off:
    /// every matmul through candle's `QMatMul` as it was, for benchmarks
    /// and comparisons.
    pub(crate) fn new(t: QTensor) -> candle_core::Result<Linear> {
        static OWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let own =
            *OWN.get_or_init(|| std::env::var("CONSTRAIN_KERNELS").map_or(true, |v| v != "candle"));
        Linear::with_kernels(t, own)
    }

    /// `own`: whether to use the own kernels where they apply (tests turn
    /// them off to compare with candle).
    pub(crate) fn with_kernels(t: QTensor, own: bool) -> candle_core::Result<Linear> {
        let (n, k) = t.shape().dims2()?;
        let dtype = t.dtype();
        let tiled = own && vnni() && n % TILE == 0 && k % QK == 0 && n > 0 && k > 0;
        let kind = match dtype {
            GgmlDType::Q5_0 if tiled => Kind::Q5_0(pack_q5_0(&t.data()?, n, k)),
            GgmlDType::Q8_0 if tiled => Kind::Q8_0(super::q8::pack(&t.data()?, n, k)),
            GgmlDType::F32 if own => Kind::F32(
                t.dequantize(&Device::Cpu)?
                    .flatten_all()?
                    .to_vec1::<f32>()?,
            ),
            GgmlDType::Q6K if tiled && k % QK_K == 0 => Kind::Q6K(pack_q6k(&t.data()?, n, k)),
            GgmlDType::Q4K if tiled && k % QK_K == 0 => {
                Kind::Q4K(super::q4k::pack(&t.data()?, n, k))
            }
            _ => Kind::Candle {
                pad_one_row: own && dtype == GgmlDType::Q6K,
                mm: QMatMul::from_qtensor(t)?,
            },
        };
        Ok(Linear { n, k, kind })
    }

    /// Output columns.
    pub(crate) fn out_dim(&self) -> usize {
        self.n
    }

    /// `x · Wᵀ` for the `x.len() / k` rows of `x`, row-major.
    pub(crate) fn forward(&self, x: &[f32]) -> candle_core::Result<Vec<f32>> {
        self.forward_input(&Input::new(x, self.k)?)
    }

    /// [`Linear::forward`] on rows that other weights may read too: their
    /// quantized forms are made once, by the first weight that needs them.
    pub(crate) fn forward_input(&self, input: &Input<'_>) -> candle_core::Result<Vec<f32>> {
        let (n, k) = (self.n, self.k);
        if input.k != k {
            candle_core::bail!("matmul input of rows of {} for {k} columns", input.k);
        }
        let (x, m) = (input.x, input.m);
        match &self.kind {
            Kind::Candle { mm, pad_one_row } => {
                if m == 1 && *pad_one_row {
                    let mut two = x.to_vec();
                    two.resize(2 * k, 0.0);
                    let mut y = candle_mm(mm, two, 2, k)?;
                    y.truncate(n);
                    Ok(y)
                } else {
                    candle_mm(mm, x.to_vec(), m, k)
                }
            }
            Kind::F32(w) => Ok(f32_mm(w, x, m, n, k)),
            Kind::Q5_0(tiles) => {
                let acts = input.q8_0();
                let mut out = vec![0f32; m * n];
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `vnni()` held when the tiles were built.
                unsafe {
                    simd::q5_0(tiles, acts, m, n, k / QK, &mut out)
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (tiles, acts);
                Ok(out)
            }
            Kind::Q6K(tiles) => {
                let kb = k / QK_K;
                let acts = input.q8k();
                let mut out = vec![0f32; m * n];
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `vnni()` held when the tiles were built.
                unsafe {
                    simd::q6k(tiles, acts, m, n, kb, &mut out)
                };
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (tiles, acts);
                Ok(out)
            }
            Kind::Q4K(tiles) => {
                let acts = input.q8k();
                let mut out = vec![0f32; m * n];
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `vnni()` held when the tiles were built; sizes
                // as `q4k::matmul` asks.
                unsafe {
                    super::q4k::matmul(tiles, acts, m, n, k / QK_K, &mut out)
                };
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (tiles, acts);
                Ok(out)
            }
            Kind::Q8_0(tiles) => {
                let acts = input.q8_0();
                let mut out = vec![0f32; m * n];
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                unsafe {
                    super::q8::matmul(tiles, acts, m, n, k / QK, &mut out)
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (tiles, acts);
                Ok(out)
            }
        }
    }

    /// [`Linear::forward`] where only the columns set in `wanted` (a
    /// bitset, bit `c % 64` of word `c / 64`) are needed, for every row:
    /// for a `Q8_0` weight, the tiles of 16 columns holding a wanted column
    /// are computed (each column bitwise as [`Linear::forward`] computes it)
    /// and the other columns are `-inf`. `None` (compute them all) for other
    /// kinds, or when more than half of the tiles are wanted.
    pub(crate) fn forward_masked(&self, x: &[f32], wanted: &[u64]) -> Option<Vec<f32>> {
        let Kind::Q8_0(tiles) = &self.kind else {
            return None;
        };
        let (n, k) = (self.n, self.k);
        // Tile t covers bits 16t..16t+16: the 16-bit lane t % 4 of word t / 4.
        // Only the set words are read, and the scan stops past half.
        let tiles_n = n / TILE;
        let mut picked = Vec::new();
        for (i, &w) in wanted.iter().enumerate().filter(|(_, &w)| w != 0) {
            for lane in 0..4 {
                let t = 4 * i + lane;
                if t < tiles_n && (w >> (16 * lane)) & 0xffff != 0 {
                    picked.push(t);
                }
            }
            if picked.len() * 2 > tiles_n {
                return None;
            }
        }
        let input = Input::new(x, k).ok()?;
        let (acts, m) = (input.q8_0(), input.m);
        let mut out = vec![f32::NEG_INFINITY; m * n];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `vnni()` held when the tiles were built; sizes as
        // `q8::matmul` asks.
        unsafe {
            super::q8::matmul_tiles(tiles, acts, m, n, k / QK, &picked, &mut out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (tiles, acts);
        Some(out)
    }
}

/// The rows of one matmul input (`m` rows of `k` values), quantized at
/// most once per form however many weights read them: Q, K and V read the
/// same normed rows, so do the MLP's gate and up. `Q5_0` and `Q8_0` take
/// candle's `BlockQ8_0::from_float` blocks (with their sums, [`Act`]),
/// `Q6_K` and `Q4_K` its `BlockQ8K::from_float` blocks; each is made, row
/// by row as before, by the first weight that needs it, so a row's blocks
/// are the same whatever reads them.
pub(crate) struct Input<'a> {
    x: &'a [f32],
    m: usize,
    k: usize,
    q8_0: OnceCell<Vec<Act>>,
    q8k: OnceCell<Vec<BlockQ8K>>,
}

impl<'a> Input<'a> {
    /// `x`: rows of `k` values, row-major.
    pub(crate) fn new(x: &'a [f32], k: usize) -> candle_core::Result<Input<'a>> {
        if k == 0 || x.len() % k != 0 {
            candle_core::bail!("matmul input of {} values for {k} columns", x.len());
        }
        Ok(Input {
            x,
            m: x.len() / k,
            k,
            q8_0: OnceCell::new(),
            q8k: OnceCell::new(),
        })
    }

    /// The rows as candle's `BlockQ8_0`s (`k` a multiple of 32).
    fn q8_0(&self) -> &[Act] {
        self.q8_0.get_or_init(|| {
            let (x, m, k) = (self.x, self.m, self.k);
            let kb = k / QK;
            let mut blocks = vec![BlockQ8_0::zeros(); m * kb];
            for r in 0..m {
                BlockQ8_0::from_float(&x[r * k..(r + 1) * k], &mut blocks[r * kb..(r + 1) * kb]);
            }
            blocks.iter().map(act).collect()
        })
    }

    /// The rows as candle's `BlockQ8K`s (`k` a multiple of 256).
    fn q8k(&self) -> &[RawQ8K] {
        let blocks = self.q8k.get_or_init(|| {
            let (x, m, k) = (self.x, self.m, self.k);
            let kb = k / QK_K;
            let mut blocks = vec![BlockQ8K::zeros(); m * kb];
            for r in 0..m {
                BlockQ8K::from_float(&x[r * k..(r + 1) * k], &mut blocks[r * kb..(r + 1) * kb]);
            }
            blocks
        });
        // SAFETY: same size, alignment and field layout (checked at
        // `RawQ8K`).
        unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const RawQ8K, blocks.len()) }
    }
}

fn candle_mm(mm: &QMatMul, x: Vec<f32>, m: usize, k: usize) -> candle_core::Result<Vec<f32>> {
    let x = Tensor::from_vec(x, (m, k), &Device::Cpu)?;
    mm.forward(&x)?.flatten_all()?.to_vec1::<f32>()
}

/// The f32 matmul: one dot product per output, in one fixed order.
fn f32_mm(w: &[f32], x: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    let ptr = SendPtr(out.as_mut_ptr());
    crate::net::pool::for_chunks(n, |cols| {
        let ptr = &ptr;
        for c in cols {
            let wc = &w[c * k..(c + 1) * k];
            for r in 0..m {
                let v = super::kernels::dot(&x[r * k..(r + 1) * k], wc);
                // SAFETY: each (r, c) is written by exactly one item.
                unsafe { *ptr.0.add(r * n + c) = v };
            }
        }
    });
    out
}

struct SendPtr(*mut f32);
// SAFETY: the workers write disjoint elements (see the callers).
unsafe impl Sync for SendPtr {}
unsafe impl Send for SendPtr {}

/// The 32 unsigned 5-bit values of a `Q5_0` block (`d`, `qh`, `qs` bytes).
fn q5_0_values(b: &[u8]) -> [u8; QK] {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    let mut v = [0u8; QK];
    for j in 0..16 {
        v[j] = (qs[j] & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
        v[j + 16] = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    v
}

fn pack_q5_0(data: &[u8], n: usize, k: usize) -> Vec<TileQ5_0> {
    const B: usize = 22;
    let kb = k / QK;
    let mut out = Vec::with_capacity(n / TILE * kb);
    for t in 0..n / TILE {
        for b in 0..kb {
            let mut tile = TileQ5_0 {
                qs: [[0; 64]; 4],
                qh: [0; 8],
                d: [0; TILE],
            };
            for c in 0..TILE {
                let at = ((t * TILE + c) * kb + b) * B;
                let blk = &data[at..at + B];
                tile.d[c] = u16::from_le_bytes([blk[0], blk[1]]);
                let v = q5_0_values(blk);
                for g in 0..8 {
                    for j in 0..4 {
                        let x = v[4 * g + j];
                        tile.qh[g] |= ((x >> 4) as u64) << (4 * c + j);
                        tile.qs[g % 4][4 * c + j] |= (x & 0x0f) << if g >= 4 { 4 } else { 0 };
                    }
                }
            }
            out.push(tile);
        }
    }
    out
}

/// 16 columns × one 256-value `Q6_K` superblock, in the layout of the
/// kernel: per 16-value sub-block `s`, `qs[s][0]` holds the low 4 bits of
/// groups `4s` (low nibbles) and `4s+1` (high nibbles), `qs[s][1]` those of
/// groups `4s+2` and `4s+3`, and `qs[s][2]` the top 2 bits of the four
/// groups at bits `2i..2i+2` (group `4s+i`); a group is 4 inputs of 16
/// columns, column `c` at bytes `4c..4c+4`. The same 210 bytes per column
/// and superblock as the GGUF block.
#[repr(C, align(64))]
#[derive(Clone)]
struct TileQ6K {
    qs: [[[u8; 64]; 3]; 16],
    /// `scales[s][c]`: sub-block `s` of column `c`.
    scales: [[i8; TILE]; 16],
    d: [u16; TILE],
}

/// The 256 unsigned 6-bit values of a `Q6_K` block (`ql`, `qh`, `scales`,
/// `d` bytes), as candle's `pack_q6k` reads them.
fn q6k_values(b: &[u8]) -> [u8; QK_K] {
    let (ql, qh) = (&b[..128], &b[128..192]);
    let mut v = [0u8; QK_K];
    for h in 0..2 {
        let (ql, qh) = (&ql[h * 64..], &qh[h * 32..]);
        for j in 0..32 {
            v[h * 128 + j] = (ql[j] & 0x0f) | ((qh[j] & 3) << 4);
            v[h * 128 + j + 32] = (ql[j + 32] & 0x0f) | (((qh[j] >> 2) & 3) << 4);
            v[h * 128 + j + 64] = (ql[j] >> 4) | (((qh[j] >> 4) & 3) << 4);
            v[h * 128 + j + 96] = (ql[j + 32] >> 4) | (((qh[j] >> 6) & 3) << 4);
        }
    }
    v
}

fn pack_q6k(data: &[u8], n: usize, k: usize) -> Vec<TileQ6K> {
    const B: usize = 210;
    let kb = k / QK_K;
    let mut out = Vec::with_capacity(n / TILE * kb);
    for t in 0..n / TILE {
        for b in 0..kb {
            let mut tile = TileQ6K {
                qs: [[[0; 64]; 3]; 16],
                scales: [[0; TILE]; 16],
                d: [0; TILE],
            };
            for c in 0..TILE {
                let at = ((t * TILE + c) * kb + b) * B;
                let blk = &data[at..at + B];
                tile.d[c] = u16::from_le_bytes([blk[208], blk[209]]);
                for s in 0..16 {
                    tile.scales[s][c] = blk[192 + s] as i8;
                }
                let v = q6k_values(blk);
                for s in 0..16 {
                    for i in 0..4 {
                        for j in 0..4 {
                            let x = v[16 * s + 4 * i + j];
                            let at = 4 * c + j;
                            tile.qs[s][i / 2][at] |= (x & 0x0f) << if i % 2 == 1 { 4 } else { 0 };
                            tile.qs[s][2][at] |= (x >> 4) << (2 * i);
                        }
                    }
                }
            }
            out.push(tile);
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod simd {
    //! The AVX-512 VNNI kernels. Callers have checked `vnni()`.
    use super::{Act, RawQ8K, SendPtr, TileQ5_0, TileQ6K, ROWS, TILE};
    use core::arch::x86_64::*;

    /// All tiles × all rows in groups of up to [`ROWS`], chunks of tiles on
    /// the own pool (`net::pool`): `$unit::<R>` computes rows `r0..r0+R` against one tile.
    macro_rules! drive {
        ($unit:ident, $tiles:expr, $acts:expr, $m:expr, $n:expr, $kb:expr, $out:expr) => {{
            let (tiles, acts, m, n, kb) = ($tiles, $acts, $m, $n, $kb);
            let ptr = SendPtr($out.as_mut_ptr());
            crate::net::pool::for_chunks(n / TILE, |range| {
                let ptr = &ptr;
                for t in range {
                    let tiles = &tiles[t * kb..(t + 1) * kb];
                    let mut r0 = 0;
                    while r0 < m {
                        let rows = (m - r0).min(ROWS);
                        // SAFETY: the caller checked the CPU; each (row,
                        // tile) is written by one item only.
                        unsafe {
                            match rows {
                                1 => $unit::<1>(tiles, acts, kb, r0, ptr.0, n, t),
                                2 => $unit::<2>(tiles, acts, kb, r0, ptr.0, n, t),
                                3 => $unit::<3>(tiles, acts, kb, r0, ptr.0, n, t),
                                4 => $unit::<4>(tiles, acts, kb, r0, ptr.0, n, t),
                                5 => $unit::<5>(tiles, acts, kb, r0, ptr.0, n, t),
                                6 => $unit::<6>(tiles, acts, kb, r0, ptr.0, n, t),
                                7 => $unit::<7>(tiles, acts, kb, r0, ptr.0, n, t),
                                _ => $unit::<ROWS>(tiles, acts, kb, r0, ptr.0, n, t),
                            }
                        }
                        r0 += rows;
                    }
                }
            });
        }};
    }

    /// All tiles × all rows; rayon-style chunks of tiles on the own pool (`net::pool`).
    pub(super) unsafe fn q5_0(
        tiles: &[TileQ5_0],
        acts: &[Act],
        m: usize,
        n: usize,
        kb: usize,
        out: &mut [f32],
    ) {
        drive!(q5_0_unit, tiles, acts, m, n, kb, out);
    }

    /// Rows `r0..r0+R` against one tile of 16 columns. Per block and row:
    /// `sumi` (exact) for the 16 columns, then candle's scalar
    /// `sumf += sumi as f32 * d_w * d_x`, lane-wise.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn q5_0_unit<const R: usize>(
        tiles: &[TileQ5_0],
        acts: &[Act],
        kb: usize,
        r0: usize,
        out: *mut f32,
        n: usize,
        t: usize,
    ) {
        let low = _mm512_set1_epi8(0x0f);
        let five = _mm512_set1_epi8(0x10);
        let mut acc = [_mm512_setzero_ps(); R];
        for (b, tile) in tiles.iter().enumerate() {
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(tile.d.as_ptr() as *const __m256i));
            let mut w = [_mm512_setzero_si512(); 8];
            for p in 0..4 {
                let q = _mm512_loadu_si512(tile.qs[p].as_ptr() as *const __m512i);
                let lo = _mm512_and_si512(q, low);
                let hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
                w[p] = _mm512_mask_add_epi8(lo, _cvtu64_mask64(tile.qh[p]), lo, five);
                w[p + 4] = _mm512_mask_add_epi8(hi, _cvtu64_mask64(tile.qh[p + 4]), hi, five);
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                let a = &acts[(r0 + r) * kb + b];
                // Two chains of dependent vpdpbusd instead of one, the
                // first starting from -16·Σ (the tiles store values + 16;
                // the integer sum is exact either way).
                let mut s0 = _mm512_set1_epi32(a.neg16);
                let mut s1 = _mm512_setzero_si512();
                for g in (0..8).step_by(2) {
                    s0 = _mm512_dpbusd_epi32(s0, w[g], _mm512_set1_epi32(a.q[g]));
                    s1 = _mm512_dpbusd_epi32(s1, w[g + 1], _mm512_set1_epi32(a.q[g + 1]));
                }
                let sumi = _mm512_add_epi32(s0, s1);
                let f = _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), dw);
                let f = _mm512_mul_ps(f, _mm512_set1_ps(a.d));
                *acc = _mm512_add_ps(*acc, f);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add((r0 + r) * n + t * TILE), *acc);
        }
    }

    pub(super) unsafe fn q6k(
        tiles: &[TileQ6K],
        acts: &[RawQ8K],
        m: usize,
        n: usize,
        kb: usize,
        out: &mut [f32],
    ) {
        drive!(q6k_unit, tiles, acts, m, n, kb, out);
    }

    /// candle's repacked `q6k_tile` arithmetic (its path for several rows),
    /// on the compact layout: per 16-value sub-block, the exact integer sum
    /// of the unsigned 6-bit values times the inputs, less `32 · bsum` in
    /// f32, times `(d · scale) · d_x`, fused into the accumulator.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn q6k_unit<const R: usize>(
        tiles: &[TileQ6K],
        acts: &[RawQ8K],
        kb: usize,
        r0: usize,
        out: *mut f32,
        n: usize,
        t: usize,
    ) {
        let low = _mm512_set1_epi8(0x0f);
        let top = _mm512_set1_epi8(0x30);
        let mut acc = [_mm512_setzero_ps(); R];
        for (b, tile) in tiles.iter().enumerate() {
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(tile.d.as_ptr() as *const __m256i));
            for s in 0..16 {
                let sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                    tile.scales[s].as_ptr() as *const __m128i,
                )));
                let scale = _mm512_mul_ps(dw, sc);
                let a = _mm512_loadu_si512(tile.qs[s][0].as_ptr() as *const __m512i);
                let c = _mm512_loadu_si512(tile.qs[s][1].as_ptr() as *const __m512i);
                let h = _mm512_loadu_si512(tile.qs[s][2].as_ptr() as *const __m512i);
                let w = [
                    _mm512_or_si512(
                        _mm512_and_si512(a, low),
                        _mm512_and_si512(_mm512_slli_epi16(h, 4), top),
                    ),
                    _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi16(a, 4), low),
                        _mm512_and_si512(_mm512_slli_epi16(h, 2), top),
                    ),
                    _mm512_or_si512(_mm512_and_si512(c, low), _mm512_and_si512(h, top)),
                    _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi16(c, 4), low),
                        _mm512_and_si512(_mm512_srli_epi16(h, 2), top),
                    ),
                ];
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = &acts[(r0 + r) * kb + b];
                    let q = x.qs.as_ptr().add(16 * s) as *const i32;
                    let mut isum = _mm512_setzero_si512();
                    for (g, w) in w.iter().enumerate() {
                        let v = std::ptr::read_unaligned(q.add(g));
                        isum = _mm512_dpbusd_epi32(isum, *w, _mm512_set1_epi32(v));
                    }
                    let bsum = x.bsums[s] as f32;
                    let f = _mm512_sub_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(32.0 * bsum));
                    *acc = _mm512_fmadd_ps(f, _mm512_mul_ps(scale, _mm512_set1_ps(x.d)), *acc);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add((r0 + r) * n + t * TILE), *acc);
        }
    }

    const _: () = assert!(TILE == 16);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::blocks::f16_to_f32;
    use candle_core::quantized::k_quants::BlockQ5_0;
    use rand::{Rng, SeedableRng};

    fn random(n: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..n)
            .map(|_| scale * (rng.random::<f32>() * 2.0 - 1.0))
            .collect()
    }

    fn qtensor(w: &[f32], n: usize, k: usize, dtype: GgmlDType) -> QTensor {
        let t = Tensor::from_vec(w.to_vec(), (n, k), &Device::Cpu).unwrap();
        QTensor::quantize(&t, dtype).unwrap()
    }

    /// candle's one-row arithmetic: its `from_float` then `vec_dot` per
    /// output (the path `QMatMul` takes for these types when `k` is not a
    /// multiple of 256), or with `unopt` its scalar `vec_dot_unopt`.
    fn oracle_with<T: GgmlType>(
        q: &QTensor,
        x: &[f32],
        n: usize,
        k: usize,
        unopt: bool,
    ) -> Vec<f32> {
        let bytes = q.data().unwrap();
        let kb = k / T::BLCK_SIZE;
        let mut w = vec![T::zeros(); n * kb];
        assert_eq!(bytes.len(), std::mem::size_of_val(w.as_slice()));
        // SAFETY: `T` is a plain `repr(C)` block of that many bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), w.as_mut_ptr() as *mut u8, bytes.len())
        };
        let m = x.len() / k;
        let mut out = Vec::new();
        for r in 0..m {
            let mut xq = vec![T::VecDotType::zeros(); kb];
            T::VecDotType::from_float(&x[r * k..(r + 1) * k], &mut xq);
            for c in 0..n {
                let w = &w[c * kb..(c + 1) * kb];
                out.push(if unopt {
                    T::vec_dot_unopt(k, w, &xq)
                } else {
                    T::vec_dot(k, w, &xq)
                });
            }
        }
        out
    }

    fn oracle<T: GgmlType>(q: &QTensor, x: &[f32], n: usize, k: usize) -> Vec<f32> {
        oracle_with::<T>(q, x, n, k, false)
    }

    /// The arithmetic each own kernel repeats: candle's `vec_dot` for
    /// `Q5_0` (its scalar form on these CPUs), the scalar `vec_dot_unopt`
    /// for `Q8_0` (one exact integer sum per block, as ggml's reference).
    fn own_oracle(q: &QTensor, x: &[f32], n: usize, k: usize, dtype: GgmlDType) -> Vec<f32> {
        match dtype {
            GgmlDType::Q5_0 => oracle::<BlockQ5_0>(q, x, n, k),
            _ => oracle_with::<BlockQ8_0>(q, x, n, k, true),
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    #[test]
    fn f16_widening_is_exact() {
        for h in (0..=u16::MAX).step_by(7) {
            let a = f16_to_f32(h);
            let b = half_ref(h);
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{h:#x}"
            );
        }
    }

    /// The reference widening through candle: a `Q8_0` block with scale
    /// `h` and first value 1 dequantizes to exactly `h` widened.
    fn half_ref(h: u16) -> f32 {
        let mut data = [0u8; 34];
        data[..2].copy_from_slice(&h.to_le_bytes());
        data[2] = 1;
        let mut blk = vec![BlockQ8_0::zeros(); 1];
        // SAFETY: 34 plain bytes into a `repr(C)` block of 34 bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), blk.as_mut_ptr() as *mut u8, 34) };
        let mut out = [0f32; 32];
        BlockQ8_0::to_float(&blk, &mut out);
        out[0]
    }

    #[test]
    fn own_kernels_equal_candles_arithmetic_bitwise_for_any_rows() {
        if !vnni() {
            eprintln!("skipping: this CPU has no AVX-512 VNNI, the own kernels are off");
            return;
        }
        // k = 896 (not a multiple of 256: candle's QMatMul takes vec_dot).
        let (n, k) = (48, 896);
        let w = random(n * k, 1, 0.5);
        let x = random(11 * k, 2, 2.0);
        for dtype in [GgmlDType::Q5_0, GgmlDType::Q8_0] {
            let q = qtensor(&w, n, k, dtype);
            let want = own_oracle(&q, &x, n, k, dtype);
            if dtype == GgmlDType::Q5_0 {
                let mm = QMatMul::from_qtensor(qtensor(&w, n, k, dtype)).unwrap();
                let candle = candle_mm(&mm, x.clone(), 11, k).unwrap();
                assert_eq!(
                    bits(&candle),
                    bits(&want),
                    "{dtype:?}: the oracle is candle's path"
                );
            }
            let lin = Linear::new(q).unwrap();
            assert!(!matches!(lin.kind, Kind::Candle { .. }), "{dtype:?}");
            for m in 1..=11 {
                let got = lin.forward(&x[..m * k]).unwrap();
                assert_eq!(bits(&got), bits(&want[..m * n]), "{dtype:?}, {m} rows");
            }
            // A row alone equals the same row inside a pass (of 11 rows:
            // the Q5_0 and Q8_0 kernels take them 8 + 3).
            let last = lin.forward(&x[10 * k..]).unwrap();
            assert_eq!(
                bits(&last),
                bits(&want[10 * n..]),
                "{dtype:?}: row 10 alone"
            );
        }
    }

    #[test]
    fn own_q6k_equals_candles_several_row_kernel_bitwise() {
        if !vnni() {
            eprintln!("skipping: this CPU has no AVX-512 VNNI, the own kernels are off");
            return;
        }
        // candle runs several Q6_K rows through its repacked VNNI kernel
        // (n a multiple of 16, k of 256): the oracle, for 2..=11 rows.
        let (n, k) = (48, 768);
        let w = random(n * k, 5, 0.5);
        let x = random(11 * k, 6, 2.0);
        let q = || qtensor(&w, n, k, GgmlDType::Q6K);
        let candle = Linear::with_kernels(q(), false).unwrap();
        assert!(matches!(candle.kind, Kind::Candle { .. }));
        let want = candle.forward(&x).unwrap();
        let own = Linear::new(q()).unwrap();
        assert!(matches!(own.kind, Kind::Q6K(_)));
        for m in 1..=11 {
            let got = own.forward(&x[..m * k]).unwrap();
            assert_eq!(bits(&got), bits(&want[..m * n]), "{m} rows");
            if m >= 2 {
                let theirs = candle.forward(&x[..m * k]).unwrap();
                assert_eq!(bits(&theirs), bits(&want[..m * n]), "candle, {m} rows");
            }
        }
        // Each row alone.
        for r in 0..11 {
            let got = own.forward(&x[r * k..(r + 1) * k]).unwrap();
            assert_eq!(bits(&got), bits(&want[r * n..(r + 1) * n]), "row {r} alone");
        }
    }

    #[test]
    fn own_q4k_equals_candles_kernel_bitwise() {
        if !vnni() {
            eprintln!("skipping: this CPU has no AVX-512 VNNI, the own kernels are off");
            return;
        }
        // candle's repacked Q4_K kernel (n a multiple of 16, k of 256) is
        // the oracle, for any number of rows.
        let (n, k) = (48, 768);
        let w = random(n * k, 7, 0.5);
        let x = random(7 * k, 8, 2.0);
        let q = || qtensor(&w, n, k, GgmlDType::Q4K);
        let candle = Linear::with_kernels(q(), false).unwrap();
        assert!(matches!(candle.kind, Kind::Candle { .. }));
        let want = candle.forward(&x).unwrap();
        let own = Linear::new(q()).unwrap();
        assert!(matches!(own.kind, Kind::Q4K(_)));
        for m in 1..=7 {
            let got = own.forward(&x[..m * k]).unwrap();
            assert_eq!(bits(&got), bits(&want[..m * n]), "{m} rows");
            let theirs = candle.forward(&x[..m * k]).unwrap();
            assert_eq!(bits(&theirs), bits(&want[..m * n]), "candle, {m} rows");
        }
        for r in 0..7 {
            let got = own.forward(&x[r * k..(r + 1) * k]).unwrap();
            assert_eq!(bits(&got), bits(&want[r * n..(r + 1) * n]), "row {r} alone");
        }
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        if !vnni() {
            eprintln!("skipping: this CPU has no AVX-512 VNNI");
            return;
        }
        // Weights and inputs at full scale: every value at its extreme.
        let (n, k) = (16, 256);
        let w: Vec<f32> = (0..n * k)
            .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        let x: Vec<f32> = (0..2 * k)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        for dtype in [GgmlDType::Q5_0, GgmlDType::Q8_0] {
            let q = qtensor(&w, n, k, dtype);
            let want = own_oracle(&q, &x, n, k, dtype);
            let got = Linear::new(q).unwrap().forward(&x).unwrap();
            assert_eq!(bits(&got), bits(&want), "{dtype:?}");
        }
        // Q6_K: against candle's kernel for several rows.
        let want = Linear::with_kernels(qtensor(&w, n, k, GgmlDType::Q6K), false)
            .unwrap()
            .forward(&x)
            .unwrap();
        let got = Linear::new(qtensor(&w, n, k, GgmlDType::Q6K))
            .unwrap()
            .forward(&x)
            .unwrap();
        assert_eq!(bits(&got), bits(&want), "Q6K");
    }

    #[test]
    fn weights_sharing_one_input_equal_each_alone() {
        // Q/K/V (and gate/up) read one `Input`: whichever weight quantizes
        // its rows first, every weight gets what it gets alone.
        let (n, k) = (32, 512);
        let x = random(3 * k, 9, 2.0);
        let types = [
            GgmlDType::Q5_0,
            GgmlDType::Q6K,
            GgmlDType::Q8_0,
            GgmlDType::Q4K,
            GgmlDType::F32,
        ];
        let lins: Vec<Linear> = types
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                let w = random(n * k, 20 + i as u64, 0.5);
                Linear::new(qtensor(&w, n, k, d)).unwrap()
            })
            .collect();
        let input = Input::new(&x, k).unwrap();
        for (lin, d) in lins.iter().zip(types) {
            let shared = lin.forward_input(&input).unwrap();
            let alone = lin.forward(&x).unwrap();
            assert_eq!(bits(&shared), bits(&alone), "{d:?}");
        }
        // A weight of another input width refuses the rows.
        let other = Linear::new(qtensor(&random(n * 256, 30, 0.5), n, 256, GgmlDType::Q8_0));
        assert!(other.unwrap().forward_input(&input).is_err());
    }

    #[test]
    fn every_type_is_row_independent() {
        // Q6_K and Q4_K through candle, F32 through the own dot product;
        // k a multiple of 256 so that candle's repacked kernels apply.
        let (n, k) = (32, 512);
        let w = random(n * k, 3, 0.5);
        let x = random(5 * k, 4, 2.0);
        for dtype in [
            GgmlDType::Q6K,
            GgmlDType::Q4K,
            GgmlDType::Q5_0,
            GgmlDType::Q8_0,
            GgmlDType::F32,
        ] {
            let lin = Linear::new(qtensor(&w, n, k, dtype)).unwrap();
            let all = lin.forward(&x).unwrap();
            for r in 0..5 {
                let one = lin.forward(&x[r * k..(r + 1) * k]).unwrap();
                assert_eq!(
                    bits(&one),
                    bits(&all[r * n..(r + 1) * n]),
                    "{dtype:?} row {r}"
                );
            }
            // And close to the exact product of the dequantized weights.
            let deq: Vec<f32> = qtensor(&w, n, k, dtype)
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            // (The inputs are quantized too: the bound is a fraction of
            // the Cauchy-Schwarz bound |x|·|w|.)
            let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>().sqrt();
            for r in 0..5 {
                let xr = &x[r * k..(r + 1) * k];
                for c in 0..n {
                    let wc = &deq[c * k..(c + 1) * k];
                    let exact: f32 = xr.iter().zip(wc).map(|(a, b)| a * b).sum();
                    let got = all[r * n + c];
                    let bound = 0.005 * norm(xr) * norm(wc);
                    assert!(
                        (got - exact).abs() < bound,
                        "{dtype:?} row {r} column {c}: {got} vs {exact}"
                    );
                }
            }
        }
    }
}

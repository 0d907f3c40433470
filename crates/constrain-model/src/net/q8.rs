//! # q8: the `Q8_0` matmul (the output head), each block loaded once for several rows
//!
//! The 0.5B's biggest matmul is its output head, tied to the `Q8_0` token
//! embeddings: 151,936 columns by 896 inputs, 145 MB read per pass. Its
//! arithmetic is candle's scalar `vec_dot_unopt` (ggml's reference): per
//! 32-value block the exact integer sum `Σ w·x`, then
//! `sum += (Σ as f32 · d_w) · d_x`, block after block, lane-wise over a
//! tile of 16 columns. One accumulator a row, so a loaded block serves
//! up to [`ROWS`] rows; a batched pass pays per row eight `vpdpbusd` and
//! four f32 operations a block, not the 24 operations of candle's AVX2
//! `vec_dot` (eight f32 lanes per column, each converted and fused on
//! its own), which made the head of a 4-row pass cost 1.7 times its 3-row
//! pass.
//!
//! [`matmul`] walks the weights outer and the rows inner: for each tile of
//! 16 columns (chunks of tiles on the own pool, [`super::pool`]) and each
//! 32-value block, each of the block's eight 64-byte groups is loaded once
//! and dotted (`vpdpbusd`) with every row of the unit. Where the rows are
//! few, each row's sum runs as two or four independent chains, so that
//! the `vpdpbusd` latency does not bound a one-row step.
//!
//! Each row's arithmetic is the same whatever the rows beside it: the exact
//! integer sum of a block starts from `-128 · Σ` of the row's 32 values
//! (the tiles store the weights + 128, unsigned, for `vpdpbusd`), so it comes
//! out signed with no subtraction (integer sums: exact in any order), and
//! the f32 part is candle's scalar one, in its order. The tests compare it
//! bitwise with `GgmlType::vec_dot_unopt` for any number of rows.

use super::blocks::Act;

/// Columns per tile: one 512-bit register of f32 or of 4-byte groups.
const TILE: usize = 16;
/// Values per block.
const QK: usize = 32;
/// Rows that share one loaded block (8 accumulators each).
const ROWS: usize = 8;

/// 16 columns × one 32-value `Q8_0` block: `qs[g]` holds inputs
/// `4g..4g+4` of column `c` at bytes `4c..4c+4`, offset by +128 (unsigned,
/// for `vpdpbusd`).
#[repr(C, align(64))]
#[derive(Clone)]
pub(crate) struct TileQ8_0 {
    qs: [[u8; 64]; 8],
    d: [u16; TILE],
}

/// Re-lays out a GGUF `Q8_0` weight of `n` columns by `k` inputs (`n` a
/// multiple of 16, `k` of 32) into tiles, tile after tile, block after
/// block.
pub(crate) fn pack(data: &[u8], n: usize, k: usize) -> Vec<TileQ8_0> {
    const B: usize = 34;
    let kb = k / QK;
    let mut out = Vec::with_capacity(n / TILE * kb);
    for t in 0..n / TILE {
        for b in 0..kb {
            let mut tile = TileQ8_0 {
                qs: [[0; 64]; 8],
                d: [0; TILE],
            };
            for c in 0..TILE {
                let at = ((t * TILE + c) * kb + b) * B;
                let blk = &data[at..at + B];
                tile.d[c] = u16::from_le_bytes([blk[0], blk[1]]);
                for g in 0..8 {
                    for j in 0..4 {
                        let x = blk[2 + 4 * g + j] as i8;
                        tile.qs[g][4 * c + j] = (x as i16 + 128) as u8;
                    }
                }
            }
            out.push(tile);
        }
    }
    out
}

struct Out(*mut f32);
// SAFETY: the chunks write disjoint outputs (see `matmul`).
unsafe impl Sync for Out {}

/// `out = acts · Wᵀ` for `m` rows of `kb` blocks each.
///
/// # Safety
///
/// The CPU has AVX-512 F / BW / VNNI and F16C; `tiles` came from [`pack`]
/// with this `n` and `kb`; `acts.len() == m * kb`; `out.len() == m * n`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matmul(
    tiles: &[TileQ8_0],
    acts: &[Act],
    m: usize,
    n: usize,
    kb: usize,
    out: &mut [f32],
) {
    debug_assert!(acts.len() == m * kb && out.len() == m * n);
    let ptr = Out(out.as_mut_ptr());
    super::pool::for_chunks(n / TILE, |range| {
        for t in range {
            // SAFETY: the caller's contract; each tile is written by one
            // chunk only.
            unsafe { tile_rows(&tiles[t * kb..(t + 1) * kb], acts, m, n, kb, t, &ptr) }
        }
    });
}

/// `m` rows' outputs for the tiles `picked` only (the other columns of
/// `out` are left as they are): the same units as [`matmul`] per tile.
///
/// # Safety
///
/// As [`matmul`], with every tile index in `picked` below `n / 16`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matmul_tiles(
    tiles: &[TileQ8_0],
    acts: &[Act],
    m: usize,
    n: usize,
    kb: usize,
    picked: &[usize],
    out: &mut [f32],
) {
    debug_assert!(acts.len() == m * kb && out.len() == m * n);
    debug_assert!(picked.iter().all(|&t| t < n / TILE));
    let ptr = Out(out.as_mut_ptr());
    super::pool::for_chunks(picked.len(), |range| {
        for &t in &picked[range] {
            // SAFETY: the caller's contract; each tile is written by one
            // chunk only.
            unsafe { tile_rows(&tiles[t * kb..(t + 1) * kb], acts, m, n, kb, t, &ptr) }
        }
    });
}

/// Every row against tile `t` (its blocks `tiles`), up to [`ROWS`] rows a
/// unit.
///
/// # Safety
///
/// As [`matmul`]; `t` is written by this call only.
#[cfg(target_arch = "x86_64")]
unsafe fn tile_rows(
    tiles: &[TileQ8_0],
    acts: &[Act],
    m: usize,
    n: usize,
    kb: usize,
    t: usize,
    ptr: &Out,
) {
    let mut r0 = 0;
    while r0 < m {
        let rows = (m - r0).min(ROWS);
        // SAFETY: the caller's contract.
        unsafe {
            match rows {
                1 => simd::unit::<1>(tiles, acts, kb, r0, ptr.0, n, t),
                2 => simd::unit::<2>(tiles, acts, kb, r0, ptr.0, n, t),
                3 => simd::unit::<3>(tiles, acts, kb, r0, ptr.0, n, t),
                4 => simd::unit::<4>(tiles, acts, kb, r0, ptr.0, n, t),
                5 => simd::unit::<5>(tiles, acts, kb, r0, ptr.0, n, t),
                6 => simd::unit::<6>(tiles, acts, kb, r0, ptr.0, n, t),
                7 => simd::unit::<7>(tiles, acts, kb, r0, ptr.0, n, t),
                _ => simd::unit::<ROWS>(tiles, acts, kb, r0, ptr.0, n, t),
            }
        }
        r0 += rows;
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{Act, TileQ8_0, TILE};
    use core::arch::x86_64::*;

    /// Rows `r0..r0+R` against one tile column (all its blocks), then the
    /// stores: per block the exact integer sum, then candle's scalar
    /// `(Σ as f32 · d_w) · d_x` added to the column's sum (see the module
    /// docs).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn unit<const R: usize>(
        tiles: &[TileQ8_0],
        acts: &[Act],
        kb: usize,
        r0: usize,
        out: *mut f32,
        n: usize,
        t: usize,
    ) {
        let mut acc = [_mm512_setzero_ps(); R];
        for (b, tile) in tiles.iter().enumerate() {
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(tile.d.as_ptr() as *const __m256i));
            let a: [&Act; R] = std::array::from_fn(|r| &acts[(r0 + r) * kb + b]);
            // Independent chains of `vpdpbusd` per row (enough in flight
            // for its latency when the rows are few); the first starts from
            // -128 · Σ of the block's 32 values (the tiles store w + 128).
            // Integer sums: exact in any order.
            let chains = match R {
                1 | 2 => 4,
                3 | 4 => 2,
                _ => 1,
            };
            let mut s = [[_mm512_setzero_si512(); 4]; R];
            for r in 0..R {
                s[r][0] = _mm512_set1_epi32(8 * a[r].neg16);
            }
            for (g, qs) in tile.qs.iter().enumerate() {
                let w = _mm512_loadu_si512(qs.as_ptr() as *const __m512i);
                for r in 0..R {
                    let c = g % chains;
                    s[r][c] = _mm512_dpbusd_epi32(s[r][c], w, _mm512_set1_epi32(a[r].q[g]));
                }
            }
            let s: [__m512i; R] = std::array::from_fn(|r| match chains {
                4 => _mm512_add_epi32(
                    _mm512_add_epi32(s[r][0], s[r][1]),
                    _mm512_add_epi32(s[r][2], s[r][3]),
                ),
                2 => _mm512_add_epi32(s[r][0], s[r][1]),
                _ => s[r][0],
            });
            for r in 0..R {
                let x = _mm512_mul_ps(
                    _mm512_mul_ps(_mm512_cvtepi32_ps(s[r]), dw),
                    _mm512_set1_ps(a[r].d),
                );
                acc[r] = _mm512_add_ps(acc[r], x);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add((r0 + r) * n + t * TILE), *acc);
        }
    }

    const _: () = assert!(TILE == 16);
}

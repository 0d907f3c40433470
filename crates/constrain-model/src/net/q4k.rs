//! # q4k: candle's repacked `Q4_K` matmul, run on the own pool
//!
//! The 0.5B's `ffn_down` is `Q4_K` in half its layers (the 1.5B's nearly
//! everywhere). candle's kernel for it on AVX-512 VNNI (`repack_x86`:
//! weights re-laid out in tiles of 16 columns per 256-value superblock, up to
//! 4 rows against each tile) is already row-independent, but it runs on
//! candle's barrier pool, whose every call waits for each of its workers,
//! started or not (see [`super::pool`]): on a busy machine the one matmul in
//! seven that is `Q4_K` held up the whole pass. This is the same kernel
//! (crate-private in candle 0.11): the same tile order ([`pack`], candle's
//! `pack_q4k`), the same integer sums and the same f32 operations in the
//! same order per row ([`simd::q4k_tile`], candle's `q4k_tile`; [`matmul`],
//! its `matmul_unit_512` over rows in groups of 4), so the outputs are
//! bitwise candle's, on [`super::pool::for_chunks`]. Two things differ from
//! candle's, neither in the arithmetic: a tile keeps the 6-bit scale and
//! min bytes and multiplies them by `d` / `dmin` in the kernel (the same
//! f32 products `pack_q4k` stores), so a decode step reads 2,432 bytes a
//! tile instead of 3,072; and the number of rows is a constant of the
//! kernel (`1..=4`), so a row's sums stay in registers. Together they
//! made the 0.5B's `896 × 4864` `Q4_K` matmul of one row 1.7× as fast.
//! It replaces candle's repacked copy (the weight stays in one copy).

use super::blocks::RawQ8K;

/// Columns per tile.
pub(crate) const TILE: usize = 16;
/// Values per superblock.
const QK_K: usize = 256;
/// Rows against one tile at once.
const MAX_MT: usize = 4;
/// Bytes of a GGUF `Q4_K` block: `d`, `dmin` (f16), 12 bytes of 6-bit
/// scales and mins, 128 bytes of nibbles.
const BLOCK: usize = 144;

/// One superblock (256 inputs) of 16 columns: candle's `TileQ4K` with its
/// per-sub-block factors kept as the 6-bit scale and min bytes and the two
/// f32 superblock factors (2,432 bytes instead of 3,072: a decode step reads
/// every byte). The kernel forms `d · scale` and `dmin · min` in f32 as
/// candle's `pack_q4k` does, so the products are the same bits.
#[repr(C, align(64))]
pub(crate) struct TileQ4K {
    /// `[8-input group (32)][column (16)][4 bytes]`; byte `j` is
    /// `q[8g + j] | q[8g + j + 4] << 4`.
    qs: [u8; QK_K / 8 * TILE * 4],
    /// Per sub-block (8) per column: the 6-bit scale.
    sc: [[u8; TILE]; 8],
    /// Per sub-block per column: the 6-bit min.
    mn: [[u8; TILE]; 8],
    /// Per column: the superblock's `d` (widened from f16).
    d: [f32; TILE],
    /// Per column: the superblock's `dmin`.
    dmin: [f32; TILE],
}

/// ggml's 6-bit scale / min unpacking for `Q4_K` superblocks.
fn scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Re-lays out a GGUF `Q4_K` weight of `n` columns by `k` inputs (`n` a
/// multiple of 16, `k` of 256) into tiles, as candle's `pack_q4k` does.
pub(crate) fn pack(data: &[u8], n: usize, k: usize) -> Vec<TileQ4K> {
    let kb = k / QK_K;
    let mut out = Vec::with_capacity(n / TILE * kb);
    for t in 0..n / TILE {
        for b in 0..kb {
            let mut tile = TileQ4K {
                qs: [0; QK_K / 8 * TILE * 4],
                sc: [[0; TILE]; 8],
                mn: [[0; TILE]; 8],
                d: [0.0; TILE],
                dmin: [0.0; TILE],
            };
            for r in 0..TILE {
                let at = ((t * TILE + r) * kb + b) * BLOCK;
                let blk = &data[at..at + BLOCK];
                let d = super::blocks::f16_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
                let dmin = super::blocks::f16_to_f32(u16::from_le_bytes([blk[2], blk[3]]));
                let (scales, qs) = (&blk[4..16], &blk[16..BLOCK]);
                tile.d[r] = d;
                tile.dmin[r] = dmin;
                for sub in 0..8 {
                    (tile.sc[sub][r], tile.mn[sub][r]) = scale_min(sub, scales);
                }
                let mut vals = [0u8; QK_K];
                for c in 0..4 {
                    for j in 0..32 {
                        let byte = qs[c * 32 + j];
                        vals[c * 64 + j] = byte & 0x0F;
                        vals[c * 64 + 32 + j] = byte >> 4;
                    }
                }
                for g in 0..QK_K / 8 {
                    for j in 0..4 {
                        tile.qs[(g * TILE + r) * 4 + j] =
                            vals[g * 8 + j] | (vals[g * 8 + j + 4] << 4);
                    }
                }
            }
            out.push(tile);
        }
    }
    out
}

/// `out = acts · Wᵀ` for `m` rows of `kb` superblocks each (candle's
/// `BlockQ8K` quantization of the inputs).
///
/// # Safety
///
/// The CPU has AVX-512 F / BW / VNNI; `tiles` came from [`pack`] with this
/// `n` and `kb`; `acts.len() == m * kb`; `out.len() == m * n`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn matmul(
    tiles: &[TileQ4K],
    acts: &[RawQ8K],
    m: usize,
    n: usize,
    kb: usize,
    out: &mut [f32],
) {
    let m_units = m.div_ceil(MAX_MT);
    let ptr = Out(out.as_mut_ptr());
    super::pool::for_chunks((n / TILE) * m_units, |range| {
        let ptr = &ptr;
        for unit in range {
            let (nt, m0) = (unit / m_units, (unit % m_units) * MAX_MT);
            let mt = (m - m0).min(MAX_MT);
            // SAFETY: the caller's contract; each (tile, row group) is one
            // unit, written by one chunk.
            unsafe { simd::unit(tiles, acts, kb, nt, m0, mt, ptr.0, n) };
        }
    });
}

struct Out(*mut f32);
// SAFETY: the chunks write disjoint outputs (see `matmul`).
unsafe impl Sync for Out {}

#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{RawQ8K, TileQ4K, MAX_MT, TILE};
    use core::arch::x86_64::*;

    #[inline(always)]
    unsafe fn bcast4(act: &[i8], off: usize) -> __m512i {
        _mm512_set1_epi32(std::ptr::read_unaligned(act.as_ptr().add(off) as *const i32))
    }

    /// candle's `q4k_tile`: one superblock tile against `MT` rows (1 to
    /// 4), each row's operations the same whatever `MT`.
    #[target_feature(enable = "avx512f,avx512vnni,avx512bw")]
    pub(super) unsafe fn q4k_tile<const MT: usize>(
        tile: &TileQ4K,
        acts: &[&RawQ8K; MT],
        acc: &mut [__m512; MT],
    ) {
        let mask = _mm512_set1_epi8(0x0F_u8 as i8);
        let d = _mm512_loadu_ps(tile.d.as_ptr());
        let dmin = _mm512_loadu_ps(tile.dmin.as_ptr());
        let widen = |b: &[u8; TILE]| {
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                b.as_ptr() as *const __m128i
            )))
        };
        for sub2 in 0..4 {
            let sa = sub2 * 2;
            let sb = sa + 1;
            let mut isum_a = [_mm512_setzero_si512(); MT];
            let mut isum_b = [_mm512_setzero_si512(); MT];
            for g4 in 0..4 {
                let ga = sa * 4 + g4;
                let gb = sb * 4 + g4;
                let wa = _mm512_loadu_si512(tile.qs.as_ptr().add(ga * TILE * 4) as *const _);
                let wb = _mm512_loadu_si512(tile.qs.as_ptr().add(gb * TILE * 4) as *const _);
                let lo_a = _mm512_and_si512(wa, mask);
                let hi_a = _mm512_and_si512(_mm512_srli_epi16(wa, 4), mask);
                let lo_b = _mm512_and_si512(wb, mask);
                let hi_b = _mm512_and_si512(_mm512_srli_epi16(wb, 4), mask);
                for m in 0..MT {
                    let act = acts[m];
                    isum_a[m] =
                        _mm512_dpbusd_epi32(isum_a[m], lo_a, bcast4(&act.qs, sa * 32 + g4 * 8));
                    isum_a[m] =
                        _mm512_dpbusd_epi32(isum_a[m], hi_a, bcast4(&act.qs, sa * 32 + g4 * 8 + 4));
                    isum_b[m] =
                        _mm512_dpbusd_epi32(isum_b[m], lo_b, bcast4(&act.qs, sb * 32 + g4 * 8));
                    isum_b[m] =
                        _mm512_dpbusd_epi32(isum_b[m], hi_b, bcast4(&act.qs, sb * 32 + g4 * 8 + 4));
                }
            }
            for (sub, isum) in [(sa, &isum_a), (sb, &isum_b)] {
                // `d · scale` and `dmin · min` in f32, as `pack_q4k` forms them.
                let scale = _mm512_mul_ps(d, widen(&tile.sc[sub]));
                let min = _mm512_mul_ps(dmin, widen(&tile.mn[sub]));
                for m in 0..MT {
                    let act = acts[m];
                    let dall = act.d;
                    let f = _mm512_cvtepi32_ps(isum[m]);
                    acc[m] = _mm512_fmadd_ps(f, _mm512_mul_ps(scale, _mm512_set1_ps(dall)), acc[m]);
                    let bsum = (act.bsums[sub * 2] as i32 + act.bsums[sub * 2 + 1] as i32) as f32;
                    acc[m] = _mm512_fnmadd_ps(min, _mm512_set1_ps(dall * bsum), acc[m]);
                }
            }
        }
    }

    /// candle's `matmul_unit_512` for `Q4_K`: tile column `nt`, rows
    /// `m0..m0 + mt`, every superblock, then the stores.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn unit(
        tiles: &[TileQ4K],
        acts: &[RawQ8K],
        kb: usize,
        nt: usize,
        m0: usize,
        mt: usize,
        out: *mut f32,
        n: usize,
    ) {
        match mt {
            1 => unit_rows::<1>(tiles, acts, kb, nt, m0, out, n),
            2 => unit_rows::<2>(tiles, acts, kb, nt, m0, out, n),
            3 => unit_rows::<3>(tiles, acts, kb, nt, m0, out, n),
            _ => unit_rows::<MAX_MT>(tiles, acts, kb, nt, m0, out, n),
        }
    }

    #[target_feature(enable = "avx512f,avx512vnni,avx512bw")]
    unsafe fn unit_rows<const MT: usize>(
        tiles: &[TileQ4K],
        acts: &[RawQ8K],
        kb: usize,
        nt: usize,
        m0: usize,
        out: *mut f32,
        n: usize,
    ) {
        let mut acc = [_mm512_setzero_ps(); MT];
        for b in 0..kb {
            let refs: [&RawQ8K; MT] = std::array::from_fn(|i| &acts[(m0 + i) * kb + b]);
            q4k_tile::<MT>(&tiles[nt * kb + b], &refs, &mut acc);
        }
        for (i, row) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add((m0 + i) * n + nt * TILE), *row);
        }
    }
}

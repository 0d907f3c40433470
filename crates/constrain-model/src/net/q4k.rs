//! # q4k: candle's repacked `Q4_K` matmul, run on the own pool
//!
//! The 0.5B's `ffn_down` is `Q4_K` in half its layers (the 1.5B's nearly
//! everywhere). candle's kernel for it on AVX-512 VNNI (`repack_x86`:
//! weights re-laid out in tiles of 16 columns per 256-value superblock, up to
//! 4 rows against each tile) is already row-independent, but it runs on
//! candle's barrier pool, whose every call waits for each of its workers,
//! started or not (see [`super::pool`]): on a busy machine the one matmul in
//! seven that is `Q4_K` held up the whole pass. This is the same kernel,
//! ported as it is (crate-private in candle 0.11): the same tile layout
//! ([`pack`], candle's `pack_q4k`), the same integer sums and the same f32
//! operations in the same order per row ([`simd::q4k_tile`], candle's
//! `q4k_tile`; [`matmul`], its `matmul_unit_512` over rows in groups of 4),
//! so the outputs are bitwise candle's, on [`super::pool::for_chunks`]. It
//! replaces candle's repacked copy (the weight stays in one copy).

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

/// One superblock (256 inputs) of 16 columns (candle's `TileQ4K`).
#[repr(C)]
pub(crate) struct TileQ4K {
    /// Per sub-block (8) per column: `d · scale`.
    scales: [[f32; TILE]; 8],
    /// Per sub-block per column: `dmin · min`.
    mins: [[f32; TILE]; 8],
    /// `[8-input group (32)][column (16)][4 bytes]`; byte `j` is
    /// `q[8g + j] | q[8g + j + 4] << 4`.
    qs: [u8; QK_K / 8 * TILE * 4],
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
                scales: [[0.0; TILE]; 8],
                mins: [[0.0; TILE]; 8],
                qs: [0; QK_K / 8 * TILE * 4],
            };
            for r in 0..TILE {
                let at = ((t * TILE + r) * kb + b) * BLOCK;
                let blk = &data[at..at + BLOCK];
                let d = super::blocks::f16_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
                let dmin = super::blocks::f16_to_f32(u16::from_le_bytes([blk[2], blk[3]]));
                let (scales, qs) = (&blk[4..16], &blk[16..BLOCK]);
                for sub in 0..8 {
                    let (sc, mn) = scale_min(sub, scales);
                    tile.scales[sub][r] = d * sc as f32;
                    tile.mins[sub][r] = dmin * mn as f32;
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

    /// candle's `q4k_tile`: one superblock tile against up to 4 rows.
    #[target_feature(enable = "avx512f,avx512vnni,avx512bw")]
    pub(super) unsafe fn q4k_tile(tile: &TileQ4K, acts: &[&RawQ8K], acc: &mut [__m512; MAX_MT]) {
        let mask = _mm512_set1_epi8(0x0F_u8 as i8);
        for sub2 in 0..4 {
            let sa = sub2 * 2;
            let sb = sa + 1;
            let mut isum_a = [_mm512_setzero_si512(); MAX_MT];
            let mut isum_b = [_mm512_setzero_si512(); MAX_MT];
            for g4 in 0..4 {
                let ga = sa * 4 + g4;
                let gb = sb * 4 + g4;
                let wa = _mm512_loadu_si512(tile.qs.as_ptr().add(ga * TILE * 4) as *const _);
                let wb = _mm512_loadu_si512(tile.qs.as_ptr().add(gb * TILE * 4) as *const _);
                let lo_a = _mm512_and_si512(wa, mask);
                let hi_a = _mm512_and_si512(_mm512_srli_epi16(wa, 4), mask);
                let lo_b = _mm512_and_si512(wb, mask);
                let hi_b = _mm512_and_si512(_mm512_srli_epi16(wb, 4), mask);
                for (m, act) in acts.iter().enumerate() {
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
                let scale = _mm512_loadu_ps(tile.scales[sub].as_ptr());
                let min = _mm512_loadu_ps(tile.mins[sub].as_ptr());
                for (m, act) in acts.iter().enumerate() {
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
    #[target_feature(enable = "avx512f,avx512vnni,avx512bw")]
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
        let mut refs: [&RawQ8K; MAX_MT] = [&acts[m0 * kb]; MAX_MT];
        let mut acc = [_mm512_setzero_ps(); MAX_MT];
        for b in 0..kb {
            for (i, a) in refs.iter_mut().enumerate().take(mt) {
                *a = &acts[(m0 + i) * kb + b];
            }
            q4k_tile(&tiles[nt * kb + b], &refs[..mt], &mut acc);
        }
        for (i, row) in acc[..mt].iter().enumerate() {
            _mm512_storeu_ps(out.add((m0 + i) * n + nt * TILE), *row);
        }
    }
}

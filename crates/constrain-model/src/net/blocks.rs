//! Layouts and conversions the quantized kernels share (`qmm`, `q4k`).

use candle_core::quantized::k_quants::BlockQ8K;

const QK_K: usize = 256;

/// candle's `BlockQ8K`: `#[repr(C)] { d: f32, qs: [i8; 256], bsums: [i16; 16] }`.
#[repr(C)]
pub(crate) struct RawQ8K {
    pub(crate) d: f32,
    pub(crate) qs: [i8; QK_K],
    pub(crate) bsums: [i16; QK_K / 16],
}
const _: () = assert!(std::mem::size_of::<RawQ8K>() == std::mem::size_of::<BlockQ8K>());
const _: () = assert!(std::mem::align_of::<RawQ8K>() == std::mem::align_of::<BlockQ8K>());

/// IEEE half to single (exact, as `half::f16::to_f32`).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalize.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

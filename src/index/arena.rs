//! # Lock-free, append-only arrays shared by the engines built on demand
//!
//! The lazy and the pushdown engines publish what their locked builders find
//! (transition rows, mask cells, memoized budgets) so that every matcher
//! reads it without a lock. [`Arena`] is that storage: cells of a fixed
//! width per index, in segments allocated on first write and never moved.
//! [`Slots`] is an arena of one `u32` per state, written once, for memos
//! every thread may fill.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// A lock-free, append-only array of `width` cells per index, grown in
/// segments allocated on first write: segment `k` holds `base << k` indices
/// starting at `base * (2^k - 1)`, so the segment table stays a few dozen
/// entries for any size and creating an arena costs next to nothing. Reads
/// are a segment lookup and a load; unwritten cells read as `T::default()`.
///
/// A small `base` keeps what a small automaton touches small: each new
/// segment is written in full when allocated (its cells initialized), so a
/// first segment of thousands of cells costs its page faults and its
/// zeroing at once, however few of them are used (a 64 KB first segment
/// of mask cells and a 256-state first segment of rows were a quarter of a
/// first walk's time over small MaskBench schemas, `benches/first_walk.rs`).
/// Doubling segments keep the waste below half for large ones.
pub(crate) struct Arena<T = AtomicU32> {
    /// `base` is a power of two: `1 << shift`.
    shift: u32,
    base: usize,
    width: usize,
    segments: Box<[OnceLock<Box<[T]>>]>,
}

impl<T: Default> Arena<T> {
    /// Room for `capacity` indices of `width` cells each, in segments of
    /// `base`, `2 base`, `4 base`, ... indices (`base` rounded up to a power
    /// of two).
    pub fn new(capacity: usize, width: usize, base: usize) -> Arena<T> {
        // (State ids are u32: no more than 2^32 indices are ever needed.)
        let capacity = capacity.min(1 << 32);
        let base = base.max(1).next_power_of_two();
        let mut n = 0;
        while base.saturating_mul((1usize << n) - 1) < capacity {
            n += 1;
        }
        Arena {
            shift: base.trailing_zeros(),
            base,
            width,
            segments: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Segment and offset (in cells) of index `i`.
    #[inline]
    fn locate(&self, i: usize) -> (usize, usize) {
        let q = (i >> self.shift) + 1;
        let k = (usize::BITS - 1 - q.leading_zeros()) as usize;
        (k, (i - self.base * ((1 << k) - 1)) * self.width)
    }

    /// The cells of index `i`, when its segment exists.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[T]> {
        let (k, at) = self.locate(i);
        let seg = self.segments.get(k)?.get()?;
        Some(&seg[at..at + self.width])
    }

    /// The cells of index `i`, allocating its segment; `None` past the
    /// capacity.
    pub fn get_or_alloc(&self, i: usize) -> Option<&[T]> {
        let (k, at) = self.locate(i);
        let seg = self.segments.get(k)?.get_or_init(|| {
            (0..(self.base << k) * self.width)
                .map(|_| T::default())
                .collect()
        });
        Some(&seg[at..at + self.width])
    }

    /// Heap memory in bytes (the segments' cells, not what they point to).
    pub fn memory_usage(&self) -> usize {
        let segs: usize = (0..self.segments.len())
            .filter(|&k| self.segments[k].get().is_some())
            .map(|k| (self.base << k) * self.width * std::mem::size_of::<T>())
            .sum();
        segs + self.segments.len() * std::mem::size_of::<OnceLock<Box<[T]>>>()
    }
}

/// A `u32` value per state, written once (or with equal values by racing
/// writers) and read without a lock (an [`Arena`] of width 1). Used for
/// memos every thread may fill.
pub(crate) struct Slots(Arena);

/// Values in the first segment of a [`Slots`] (256 bytes, doubling from
/// there).
const SLOTS_BASE: usize = 64;

impl Slots {
    /// Room for `capacity` states.
    pub fn new(capacity: usize) -> Slots {
        Slots(Arena::new(capacity, 1, SLOTS_BASE))
    }

    /// The value of `s`, if set.
    #[inline]
    pub fn get(&self, s: u32) -> Option<u32> {
        match self.0.get(s as usize)?[0].load(Ordering::Relaxed) {
            0 => None,
            u32::MAX => Some(u32::MAX),
            x => Some(x - 1),
        }
    }

    /// Sets the value of `s` (ignored past the capacity).
    pub fn set(&self, s: u32, v: u32) {
        if let Some(cell) = self.0.get_or_alloc(s as usize) {
            let stored = if v >= u32::MAX - 1 { u32::MAX } else { v + 1 };
            cell[0].store(stored, Ordering::Relaxed);
        }
    }

    /// Heap memory in bytes.
    pub fn memory_usage(&self) -> usize {
        self.0.memory_usage()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_keep_values_and_the_unknown_marker() {
        let s = Slots::new(3000);
        assert_eq!(s.get(5), None);
        s.set(5, 0);
        s.set(2047, 7);
        s.set(2999, u32::MAX);
        s.set(5000, 1); // past the capacity: ignored
        assert_eq!(s.get(5), Some(0));
        assert_eq!(s.get(2047), Some(7));
        assert_eq!(s.get(2999), Some(u32::MAX));
        assert_eq!(s.get(6), None);
        assert_eq!(s.get(5000), None);
    }

    #[test]
    fn arena_segments_cover_every_index_once() {
        let a: Arena = Arena::new(10_000, 3, 4);
        for i in 0..10_000 {
            let cells = a.get_or_alloc(i).unwrap();
            assert_eq!(cells.len(), 3);
            assert_eq!(cells[1].load(Ordering::Relaxed), 0, "index {i} is fresh");
            cells[1].store(i as u32 + 1, Ordering::Relaxed);
        }
        for i in 0..10_000 {
            assert_eq!(a.get(i).unwrap()[1].load(Ordering::Relaxed), i as u32 + 1);
        }
        assert!(Arena::<AtomicU32>::new(5, 1, 4)
            .get_or_alloc(1 << 20)
            .is_none());
        // A base that is not a power of two is rounded up (segments of 4,
        // 8, ...): every index still has its own cells.
        let b: Arena<u8> = Arena::new(100, 1, 3);
        let ptrs: std::collections::HashSet<*const u8> = (0..100)
            .map(|i| b.get_or_alloc(i).unwrap().as_ptr())
            .collect();
        assert_eq!(ptrs.len(), 100);
    }
}

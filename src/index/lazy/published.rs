//! What a lazy index's readers see without the lock: see [`Published`].

use super::DEAD;
use crate::index::arena::{Arena, Slots};
use std::sync::atomic::Ordering;

/// States in the first segment of [`Published::rows`] (doubling from there;
/// a row is a state's byte classes, four bytes each).
const ROW_BASE: usize = 16;

/// What the determinizer found, copied out where readers need no lock: an
/// append-only arena of rows ([`Arena`]) and per-state acceptance and
/// distance. A row entry is the DFA's next state plus one, so 0 is "not
/// published yet" and 1 is "dead". The writer (who holds the [`Core`] lock)
/// publishes the acceptance and distance of every state it created *before*
/// any row that leads there (release stores; a reader's acquire load of the
/// entry then sees them), so a state a reader obtained from a published row
/// is always described.
pub(super) struct Published {
    pub(super) classes: [u8; 256],
    pub(super) rows: Arena,
    /// Per state: its distance to acceptance, with [`ACCEPTS`] set when it
    /// accepts.
    pub(super) info: Slots,
}

/// The acceptance bit of a [`Published::info`] value.
pub(super) const ACCEPTS: u32 = 1 << 30;

impl Published {
    pub(super) fn new(classes: [u8; 256], max_states: usize) -> Published {
        let stride = classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1;
        Published {
            classes,
            rows: Arena::new(max_states, stride, ROW_BASE),
            info: Slots::new(max_states),
        }
    }

    /// The state after `b` in `s` ([`DEAD`] included), when the row of `s`
    /// is published.
    #[inline]
    pub(super) fn next(&self, s: u32, b: u8) -> Option<u32> {
        let row = self.rows.get(s as usize)?;
        match row[self.classes[b as usize] as usize].load(Ordering::Acquire) {
            0 => None,
            1 => Some(DEAD),
            t => Some(t - 1),
        }
    }

    /// Publishes the transition of `s` on `b`, to `t` ([`DEAD`] included;
    /// its info already published).
    pub(super) fn publish(&self, s: u32, b: u8, t: u32) {
        if let Some(cells) = self.rows.get_or_alloc(s as usize) {
            let v = if t == DEAD { 1 } else { t + 1 };
            cells[self.classes[b as usize] as usize].store(v, Ordering::Release);
        }
    }

    /// Acceptance and distance of `s`, when published.
    #[inline]
    pub(super) fn info(&self, s: u32) -> Option<(bool, u32)> {
        let v = self.info.get(s)?;
        let d = v & !ACCEPTS;
        Some((
            v & ACCEPTS != 0,
            if d == ACCEPTS - 1 { u32::MAX } else { d },
        ))
    }

    pub(super) fn memory_usage(&self) -> usize {
        self.info.memory_usage() + self.rows.memory_usage()
    }
}

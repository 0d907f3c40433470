//! # Cancel: a compile that stops when it is told to, or past its deadline
//!
//! A [`CancelToken`] is an `Arc<AtomicBool>` and an optional deadline. The
//! caller passes one to [`crate::Compiler::compile_cancellable`]; for the
//! length of that compile the token is the compiling thread's current one
//! ([`scope`]), and the long loops of the core ask
//! [`poll`] at their heads:
//!
//! * between the compiler's phases (schema lowering, the automaton, the
//!   token index), in `compiler.rs`;
//! * at the head of every state the subset construction explores
//!   (`dfa/determinize.rs`, `Determinizer::explore`): eager DFAs, the
//!   states a lazy DFA determinizes up front, and every fragment of the
//!   pushdown engine;
//! * the eager token index stops at [`CancelToken::deadline`] through its
//!   own `IndexConfig::deadline`, which the compiler sets from the token.
//!
//! A loop that sees the token fired returns its own "limit" error; the
//! compiler then replaces whatever error came out with
//! [`crate::CompileError::TimedOut`] (naming the budget) or
//! [`crate::CompileError::Cancelled`], so the loops need no new variants.
//!
//! ## Invariants
//!
//! * [`poll`] is cheap: a thread-local counter, a relaxed load of the flag,
//!   and a clock read only every [`CLOCK_EVERY`] polls. Without a token in
//!   scope (a matcher determinizing lazily while serving) it is always
//!   `false`.
//! * A fired token never un-fires: the flag is only ever set, the deadline
//!   only passes.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls between two reads of the clock.
pub const CLOCK_EVERY: u32 = 64;

/// Stops a compile: [`CancelToken::cancel`] from any thread, or a deadline.
#[derive(Clone, Debug, Default)]
pub struct CancelToken {
    flag: Arc<AtomicBool>,
    deadline: Option<(Instant, Duration)>,
}

/// Why a token fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fired {
    /// [`CancelToken::cancel`] was called.
    Cancelled,
    /// The deadline passed; the budget it was set from.
    TimedOut(Duration),
}

impl CancelToken {
    /// A token that fires only when cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// A token that also fires `budget` from now.
    pub fn with_budget(budget: Duration) -> CancelToken {
        CancelToken {
            flag: Arc::default(),
            deadline: Some((Instant::now() + budget, budget)),
        }
    }

    /// Fires the token (every clone of it).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// The deadline, when it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.map(|(d, _)| d)
    }

    /// Whether, and why, the token has fired (reads the clock).
    pub fn fired(&self) -> Option<Fired> {
        if self.flag.load(Ordering::Relaxed) {
            return Some(Fired::Cancelled);
        }
        match self.deadline {
            Some((d, budget)) if Instant::now() >= d => Some(Fired::TimedOut(budget)),
            _ => None,
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
    static COUNT: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f` with `token` as this thread's current token (the previous one
/// restored after, even on a panic).
pub fn scope<R>(token: Option<&CancelToken>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<CancelToken>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let old = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = old);
        }
    }
    let old = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), token.cloned()));
    let _restore = Restore(old);
    f()
}

/// Whether the current token has fired: the cheap check for loop heads
/// (the clock is read every [`CLOCK_EVERY`] calls).
pub fn poll() -> bool {
    CURRENT.with(|c| {
        let c = c.borrow();
        let Some(t) = c.as_ref() else {
            return false;
        };
        if t.flag.load(Ordering::Relaxed) {
            return true;
        }
        let n = COUNT.with(|n| {
            let v = n.get().wrapping_add(1);
            n.set(v);
            v
        });
        n % CLOCK_EVERY == 0 && t.fired().is_some()
    })
}

/// The current token's state, reading the clock now.
pub fn current() -> Option<Fired> {
    CURRENT.with(|c| c.borrow().as_ref().and_then(CancelToken::fired))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_sees_a_cancel_only_in_scope() {
        let t = CancelToken::new();
        assert!(!poll());
        scope(Some(&t), || {
            assert!(!poll());
            t.cancel();
            assert!(poll());
            assert_eq!(current(), Some(Fired::Cancelled));
        });
        assert!(!poll());
    }

    #[test]
    fn poll_sees_a_passed_deadline() {
        let t = CancelToken::with_budget(Duration::ZERO);
        scope(Some(&t), || {
            assert!((0..CLOCK_EVERY).any(|_| poll()));
            assert_eq!(current(), Some(Fired::TimedOut(Duration::ZERO)));
        });
    }
}

//! `sampling`: arbitrary logits (NaN, ±∞, huge, denormal), masks (dense bit
//! patterns and sparse id lists, so both code paths run), histories, logit
//! biases and settings.
//!
//! Invariants (in `constrain_testkit::check::check_sampling_case`, replayed by
//! `tests/fuzz_regressions.rs`): the picked token is allowed by the mask, not
//! removed, and in the support of the distribution; probabilities are finite,
//! in (0, 1] and sum to 1; top-k, min-p and greedy hold; "all removed" only
//! when nothing moderate survives; the same seed picks the same token.
//!
//! Bounds: at most 2,048 logits, 32 history tokens, 8 biases. On a violation
//! the panic message carries the case as JSON: save it under
//! `fuzz/regressions/sampling/NAME.json`.
#![no_main]

use arbitrary::Arbitrary;
use constrain_testkit::check::{check_sampling_case, SamplingCase, SamplingOutcome};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum F {
    Nan,
    PosInf,
    NegInf,
    Max,
    Lowest,
    MinPositive,
    Denormal,
    Zero,
    NegZero,
    Small(i8),
    Unit(u8),
    Big(i8),
    Any(f32),
}

impl F {
    fn get(self) -> f32 {
        match self {
            F::Nan => f32::NAN,
            F::PosInf => f32::INFINITY,
            F::NegInf => f32::NEG_INFINITY,
            F::Max => f32::MAX,
            F::Lowest => f32::MIN,
            F::MinPositive => f32::MIN_POSITIVE,
            F::Denormal => f32::from_bits(1),
            F::Zero => 0.0,
            F::NegZero => -0.0,
            F::Small(x) => x as f32 / 4.0,
            F::Unit(x) => x as f32 / 255.0,
            F::Big(x) => x as f32 * 1e36,
            F::Any(x) => x,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Mask {
    None,
    Bits(Vec<u8>),
    Ids(Vec<u16>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    logits: Vec<F>,
    repeat: u8,
    mask: Mask,
    history: Vec<u16>,
    // `None`: the default value, so most configs are valid.
    temperature: Option<F>,
    top_k: u16,
    top_p: Option<F>,
    min_p: Option<F>,
    repetition: Option<F>,
    frequency: Option<F>,
    presence: Option<F>,
    last_n: Option<u8>,
    bias: Vec<(u16, F)>,
    seed: u64,
}

fn knob(f: Option<F>, default: f32) -> u32 {
    f.map_or(default, F::get).to_bits()
}

fn case_of(i: &Input) -> SamplingCase {
    let base: Vec<u32> = i
        .logits
        .iter()
        .take(256)
        .map(|f| f.get().to_bits())
        .collect();
    let width = (base.len() * (1 + i.repeat as usize % 8)).min(2048);
    let logits: Vec<u32> = base.iter().copied().cycle().take(width).collect();
    let n = width.max(1);
    let mask = match &i.mask {
        Mask::None => None,
        Mask::Bits(b) if b.is_empty() => Some(Vec::new()),
        Mask::Bits(b) => Some(
            (0..width as u32)
                .filter(|&t| b[(t as usize / 8) % b.len()] >> (t % 8) & 1 == 1)
                .collect(),
        ),
        Mask::Ids(ids) => Some(ids.iter().take(64).map(|&t| t as u32 % n as u32).collect()),
    };
    SamplingCase {
        logits,
        mask,
        // Ids mostly inside the width, sometimes just past it.
        history: i
            .history
            .iter()
            .take(32)
            .map(|&t| t as u32 % (n as u32 + 2))
            .collect(),
        knobs: [
            knob(i.temperature, 1.0),
            knob(i.top_p, 1.0),
            knob(i.min_p, 0.0),
            knob(i.repetition, 1.0),
            knob(i.frequency, 0.0),
            knob(i.presence, 0.0),
        ],
        top_k: i.top_k as u32 % 300,
        penalty_last_n: i.last_n.map(u32::from),
        logit_bias: i
            .bias
            .iter()
            .take(8)
            .map(|&(t, b)| (t as u32 % (n as u32 + 2), b.get().to_bits()))
            .collect(),
        seed: i.seed,
    }
}

fuzz_target!(|input: Input| {
    let case = case_of(&input);
    match check_sampling_case(&case) {
        Ok(outcome) => stats(&outcome),
        Err(v) => panic!(
            "{v}\ncase: {}",
            serde_json::to_string(&case).unwrap_or_default()
        ),
    }
});

/// With `CONSTRAIN_FUZZ_STATS` set, prints how many cases picked a token, got
/// a typed error, or had an invalid config, every 65,536 runs.
fn stats(outcome: &SamplingOutcome) {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static RUNS: [AtomicUsize; 3] = [
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ];
    let k = match outcome {
        SamplingOutcome::Picked { .. } => 0,
        SamplingOutcome::Error(_) => 1,
        SamplingOutcome::InvalidConfig => 2,
    };
    RUNS[k].fetch_add(1, Relaxed);
    let total: usize = RUNS.iter().map(|r| r.load(Relaxed)).sum();
    if total % 65536 == 0 && std::env::var_os("CONSTRAIN_FUZZ_STATS").is_some() {
        eprintln!(
            "sampling: {} picked, {} typed errors, {} invalid configs",
            RUNS[0].load(Relaxed),
            RUNS[1].load(Relaxed),
            RUNS[2].load(Relaxed)
        );
    }
}

//! A server over the tiny test vocabulary and a fake model (random logits,
//! `--delay-ms` per forward pass), fed through the shared decode loop in
//! chunks of `--prefill-chunk` tokens: the target of `scripts/test-faults
//! --short`, which needs no model file. Prints `listening on ADDR` once
//! bound, then serves until killed.
//!
//! ```text
//! cargo run --release -p constrain-server --example fake_serve -- \
//!     [--port N] [--parallel N] [--max-queue N] [--delay-ms N] [--context N]
//!     [--prefill-chunk N] [--read-timeout-s S] [--max-connections N]
//!     [--api-key KEY] [--compile-timeout-ms MS] [--max-body-bytes N]
//! ```

use constrain_model::LanguageModel;
use constrain_server::batch::{BatchConfig, Batcher, Looped};
use constrain_server::{ModelFactory, SeqModel, ServerConfig, ServerState};
use constrain_testkit::{tiny, FakeModel};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut port = 0u16;
    let mut delay_ms = 0u64;
    let mut context = 4096usize;
    let mut prefill_chunk = 16usize;
    let mut config = ServerConfig::default();
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--port" => port = value()?.parse()?,
            "--parallel" => config.parallel = value()?.parse()?,
            "--max-queue" => config.max_queue = value()?.parse()?,
            "--delay-ms" => delay_ms = value()?.parse()?,
            "--context" => context = value()?.parse()?,
            "--prefill-chunk" => prefill_chunk = value()?.parse()?,
            "--read-timeout-s" => config.read_timeout = Duration::from_secs_f64(value()?.parse()?),
            "--max-connections" => config.max_connections = value()?.parse()?,
            "--api-key" => config.api_key = Some(value()?),
            "--compile-timeout-ms" => {
                config.compile.timeout = Duration::from_millis(value()?.parse()?)
            }
            "--max-body-bytes" => config.max_body_bytes = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let tok = tiny::tokenizer()?;
    let width = tok.vocab.logits_width();
    static SEED: AtomicU64 = AtomicU64::new(1);
    let models = move || {
        let mut rng = rand::rngs::StdRng::seed_from_u64(SEED.fetch_add(1, Ordering::Relaxed));
        let m = FakeModel::new(width, move |_| {
            if delay_ms > 0 {
                std::thread::sleep(Duration::from_millis(delay_ms));
            }
            (0..width).map(|_| rng.random_range(-8.0f32..8.0)).collect()
        })
        .with_context_length(context);
        Ok(m)
    };
    let batcher = Batcher::start_with(
        Looped(models),
        BatchConfig::default()
            .prefill_chunk(prefill_chunk)
            .prefix_cache_bytes(0),
    );
    let factory: ModelFactory = Arc::new(move || {
        let h = batcher.handle()?;
        debug_assert_eq!(h.logits_width(), width);
        Ok(Box::new(h) as SeqModel)
    });
    let state = ServerState::new(
        config,
        "tiny-fake",
        tok.tokenizer,
        Arc::new(tok.vocab),
        factory,
    )?;
    constrain_server::run_blocking(state, &format!("127.0.0.1:{port}"), |bound| {
        println!("listening on {bound}");
    })?;
    Ok(())
}

//! Compiles the given MaskBench files repeatedly with one shared vocabulary
//! and prints the mean time of each TTFM phase (a development aid, e.g. under
//! `perf record`): `cargo run --release --example ttfm_profile -- REPS FILE...`.
//! Reads `$CONSTRAIN_HOME/tokenizer.json` (default `~/.cache/constrain`).
use constrain::schema::Whitespace;
use constrain::vocab::Vocabulary;
use constrain_testkit::maskbench::{compile_case, RunConfig};
use std::sync::Arc;
use std::time::Instant;

/// The binary's allocator, as `constrain maskbench` runs it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // As the binary's schema commands run.
    constrain_testkit::process::keep_freed_memory();
    constrain_testkit::process::no_huge_pages();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(reps) = args.first().and_then(|a| a.parse::<usize>().ok()) else {
        eprintln!("usage: ttfm_profile REPS FILE...");
        std::process::exit(2);
    };
    if args.len() < 2 {
        eprintln!("usage: ttfm_profile REPS FILE...");
        std::process::exit(2);
    }
    let home = std::env::var("CONSTRAIN_HOME").unwrap_or_else(|_| {
        format!(
            "{}/.cache/constrain",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let v = Vocabulary::from_tokenizer_json_file(format!("{home}/tokenizer.json")).unwrap();
    let vocab = Arc::new(v.with_logits_width(151_936).unwrap());
    let mut cfg = RunConfig::default();
    cfg.schema.whitespace = Whitespace::Flexible { max: 2 };
    let schemas: Vec<serde_json::Value> = args[1..]
        .iter()
        .map(|f| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            v["schema"].clone()
        })
        .collect();
    // warm the vocabulary tries
    let _ = compile_case(&schemas[0], &vocab, &cfg);
    let mut tot = [0.0f64; 3];
    let t = Instant::now();
    for _ in 0..reps {
        for s in &schemas {
            if let Ok((ix, p)) = compile_case(s, &vocab, &cfg) {
                if std::env::var_os("STATS").is_some() {
                    let st = ix.stats();
                    eprintln!(
                        "states {} classes {} walks {} body {} masks {} index {:.1} ms",
                        st.states,
                        st.byte_classes,
                        st.horizon_classes,
                        st.body_states,
                        st.distinct_masks,
                        p.index / 1e3
                    );
                }
                tot[0] += p.schema;
                tot[1] += p.dfa;
                tot[2] += p.index;
            }
        }
    }
    let n = (reps * schemas.len()) as f64;
    eprintln!(
        "per compile: schema {:.2} ms, dfa {:.2} ms, index {:.2} ms; wall {:.1} s",
        tot[0] / n / 1e3,
        tot[1] / n / 1e3,
        tot[2] / n / 1e3,
        t.elapsed().as_secs_f64()
    );
}

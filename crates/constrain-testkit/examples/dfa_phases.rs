//! Splits the DFA phase of TTFM for MaskBench files into regex parsing
//! (regex-syntax and the subset parser), NFA compilation and the rest of
//! `ByteDfa::build` (determinization up to the lazy threshold), one line per
//! schema (a development aid): `cargo run --release --example dfa_phases --
//! FILE...`. With `DUMP=DIR`, writes each schema's regex to `DIR/NAME.re`
//! instead (input for `examples/parse_check.rs`).
use constrain::dfa::{ByteDfa, Dfa, DfaConfig};
use constrain::schema::{self, Whitespace};
use constrain_testkit::maskbench::{load_file, RunConfig};
use regex_automata::nfa::thompson;
use std::time::Instant;

/// The binary's allocator, as `constrain maskbench` runs it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    // As the binary's schema commands run.
    constrain_testkit::process::keep_freed_memory();
    constrain_testkit::process::no_huge_pages();
    let mut cfg = RunConfig::default();
    cfg.schema.whitespace = Whitespace::Flexible { max: 2 };
    let dump = std::env::var("DUMP").ok();
    let mut total = [0.0f64; 4];
    for f in std::env::args().skip(1) {
        let Ok(cases) = load_file(std::path::Path::new(&f)) else {
            continue;
        };
        let Some(case) = cases.first() else { continue };
        let Ok(c) = schema::compile(&case.schema, &cfg.schema) else {
            continue;
        };
        let name = f.rsplit('/').next().unwrap_or(&f);
        if let Some(dir) = &dump {
            std::fs::write(format!("{dir}/{name}.re"), &c.regex).expect("write");
            continue;
        }
        let t = Instant::now();
        let reference = regex_syntax::ParserBuilder::new()
            .nest_limit(constrain::dfa::NEST_LIMIT)
            .build()
            .parse(&c.regex);
        drop(reference);
        let syntax = ms(t);
        let t = Instant::now();
        let Some(hir) = ByteDfa::parse_subset(&c.regex) else {
            println!("outside the subset: {name}");
            continue;
        };
        let subset = ms(t);
        let t = Instant::now();
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .nfa_size_limit(None)
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_from_hir(&hir);
        let nfa_ms = ms(t);
        let nfa_states = nfa.map_or(0, |n| n.states().len());
        drop(hir);
        let t = Instant::now();
        let dfa = ByteDfa::build(&c.regex, &DfaConfig::default());
        let build = ms(t);
        let lazy = matches!(dfa, Ok(Dfa::Lazy(_)));
        let det = build - subset - nfa_ms;
        println!(
            "{build:8.1} ms: regex-syntax {syntax:7.1} subset {subset:6.1} nfa {nfa_ms:6.1} \
             ({nfa_states} states) det {det:7.1}; {} KB, lazy {lazy}: {name}",
            c.regex.len() / 1024
        );
        for (a, v) in total.iter_mut().zip([syntax, subset, nfa_ms, det]) {
            *a += v;
        }
    }
    if dump.is_none() {
        println!(
            "total ms: regex-syntax {:.0} subset {:.0} nfa {:.0} det {:.0}",
            total[0], total[1], total[2], total[3]
        );
    }
}

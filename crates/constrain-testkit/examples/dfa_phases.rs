//! Splits the DFA phase of TTFM for MaskBench files into the NFA build
//! `ByteDfa::build` uses (`direct`: the subset parser's tree compiled
//! straight into an NFA) and the rest of it (determinization up to the lazy
//! threshold), and times the paths it replaced: regex-syntax's parse, and
//! the subset parser's `Hir` compiled by regex-automata and dropped
//! (`hir`: parse / compile / drop). One line per schema (a development
//! aid): `cargo run --release --example dfa_phases -- FILE...`. With `DUMP=DIR`, writes each schema's regex to `DIR/NAME.re`
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
        let compile = ms(t);
        let hir_states = nfa.map_or(0, |n| n.states().len());
        let t = Instant::now();
        drop(hir);
        let hir_drop = ms(t);
        let config = DfaConfig::default().nfa_size_limit(usize::MAX);
        let t = Instant::now();
        let direct = ByteDfa::nfa(&c.regex, &config);
        let direct_ms = ms(t);
        let direct_states = direct.ok().flatten().map_or(0, |n| n.len());
        let t = Instant::now();
        let dfa = ByteDfa::build(&c.regex, &DfaConfig::default());
        let build = ms(t);
        let lazy = matches!(dfa, Ok(Dfa::Lazy(_)));
        let det = build - direct_ms;
        let hir_total = subset + compile + hir_drop;
        println!(
            "{build:8.1} ms: direct {direct_ms:7.1} ({direct_states} states) det {det:7.1}; \
             hir {subset:6.1} / {compile:6.1} / {hir_drop:6.1} ({hir_states} states); \
             regex-syntax {syntax:7.1}; {} KB, lazy {lazy}: {name}",
            c.regex.len() / 1024
        );
        for (a, v) in total.iter_mut().zip([syntax, hir_total, direct_ms, det]) {
            *a += v;
        }
    }
    if dump.is_none() {
        println!(
            "total ms: regex-syntax parse {:.0}; NFA by the Hir path {:.0}, direct {:.0}; det {:.0}",
            total[0], total[1], total[2], total[3]
        );
    }
}

//! Speculative decoding on the real models: the 0.5B drafts, the 1.5B
//! verifies (both Qwen2.5-Coder Q4_K_M under `$CONSTRAIN_HOME`).
//!
//! 1. **The cost of verification**: one target pass over `n` positions
//!    (`forward_all`) against `n` single steps, n = 1..=8, after the real
//!    prompt; and one draft step. This bounds what drafting can win: a round
//!    that drafts `k` tokens costs `k` draft steps plus one pass over `k + 1`
//!    positions, and yields `accepted + 1` tokens.
//! 2. **End to end**, greedy, `schemas/person.json`, "Describe a person
//!    named Ada.": the target alone, then speculative with a fixed K for
//!    each K, then the adaptive schedule; decode time (prefill excluded: the
//!    draft's own prefill is counted in prefill), speed-up over the target
//!    alone, acceptance, mean accepted length, where a round's time goes,
//!    and whether the output equals the target's alone.
//!
//! Times are wall-clock medians of `--reps N` (default 3) for part 1, one
//! run each for part 2 (runs interleaved with a run of the target alone so
//! that load drifts hit both); CPU time (all threads, from
//! `/proc/self/task/*/schedstat`) is printed beside, which a loaded machine
//! inflates less.
//!
//! `cargo bench -p constrain-model --bench speculative [-- --ks 1,2,4
//! --reps 3 --max-tokens 60]`. Skips with a message when a model is absent.

use constrain::Source;
use constrain_model::generate::{Engine, GenerateConfig, Generation, SpeculativeConfig};
use constrain_model::{prompt, LanguageModel, QwenModel, TokenizerSource};
use std::path::PathBuf;

mod common;
use common::{cpu, home, median, timed, Args};

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`.
    let Some(args) = Args::for_bench("speculative") else {
        return;
    };
    let reps = args.value("--reps", 3);
    let max_tokens = args.value("--max-tokens", 60);
    let ks: Vec<usize> = args
        .text("--ks")
        .unwrap_or_else(|| "1,2,3,4".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|&k| k > 0)
        .collect();
    let target_path = home().join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    let draft_path = home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    for p in [&target_path, &draft_path] {
        if !p.exists() {
            eprintln!(
                "skipping: {} not found (scripts/fetch-assets --model 1.5b)",
                p.display()
            );
            return;
        }
    }
    let mut engine = Engine::load(&target_path, &TokenizerSource::Gguf).expect("target");
    let mut draft = QwenModel::load(&draft_path).expect("draft");
    let schema_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/person.json");
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&schema_path).expect("schemas/person.json"))
            .expect("schema JSON");
    let index = engine
        .compile(&Source::json_schema(schema.clone()))
        .expect("compile")
        .index()
        .clone();
    let system = prompt::schema_system_message(&schema);
    let p = engine
        .prompt_tokens("Describe a person named Ada.", Some(&system), false)
        .expect("prompt");
    println!(
        "target {} / draft {} ({} threads), prompt {} tokens",
        target_path.display(),
        draft_path.display(),
        constrain_model::threads(),
        p.len()
    );

    // 1. One pass over n positions against n single steps.
    let more: Vec<constrain::vocab::TokenId> = p[p.len() - 8..].to_vec();
    for (name, m) in [
        ("target", engine.model() as &mut dyn LanguageModel),
        ("draft", &mut draft as &mut dyn LanguageModel),
    ] {
        m.forward(&p, 0).expect("prefill");
        let pl = p.len();
        let mut single = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let (w, c, _) = timed(|| m.forward(&more[..1], pl).expect("step"));
            single.0.push(w);
            single.1.push(c);
            assert!(m.truncate(pl));
        }
        let (sw, sc) = (median(single.0), median(single.1));
        println!("{name}: one step {sw:.1} ms (cpu {sc:.1} ms)");
        if name == "draft" {
            continue;
        }
        for n in 2..=8 {
            let mut pass = (Vec::new(), Vec::new());
            for _ in 0..reps {
                let (w, c, _) = timed(|| m.forward_all(&more[..n], pl).expect("pass"));
                pass.0.push(w);
                pass.1.push(c);
                assert!(m.truncate(pl));
            }
            let (pw, pc) = (median(pass.0), median(pass.1));
            println!(
                "{name}: one pass over {n} positions {pw:.1} ms (cpu {pc:.1} ms) = {:.2} single steps (cpu {:.2})",
                pw / sw,
                pc / sc
            );
        }
    }

    // 2. End to end.
    let config = GenerateConfig::greedy(max_tokens);
    let alone = |engine: &mut Engine<QwenModel>| -> (f64, f64, Generation) {
        let c = cpu();
        let g = engine
            .generate(&p, Some(index.clone()), &config, &mut |_| {})
            .expect("generate");
        let cpu_ms = (cpu() - c) * 1e3;
        let dec = g.stats.decode_time.as_secs_f64() * 1e3;
        (dec, cpu_ms, g)
    };
    let runs: Vec<SpeculativeConfig> = ks
        .iter()
        .map(|&k| SpeculativeConfig::fixed(k))
        .chain(ks.iter().max().map(|&k| SpeculativeConfig::adaptive(k)))
        .collect();
    for spec in runs {
        let (a_dec, a_cpu, a) = alone(&mut engine);
        let c = cpu();
        let g = engine
            .generate_speculative(
                &mut draft,
                &p,
                Some(index.clone()),
                &config,
                &spec,
                &mut |_| {},
            )
            .expect("speculative");
        let s_cpu = (cpu() - c) * 1e3;
        let s_dec = g.stats.decode_time.as_secs_f64() * 1e3;
        let st = g.stats.speculative.clone().unwrap_or_default();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        println!(
            "K={}{}: {} tokens; decode {s_dec:.0} ms vs alone {a_dec:.0} ms ({} tokens): speed-up {:.2}x \
             (whole run cpu {s_cpu:.0} vs {a_cpu:.0} ms); accepted {}/{} ({:.1}%), mean accepted length {:.2}, \
             {} rounds + {} plain steps; draft prefill {:.0} ms, draft passes {:.0} ms ({} of {:.1} ms), \
             target passes {:.0} ms over {} positions, the rest {:.0} ms; same output as alone: {}",
            spec.draft_tokens,
            if spec.adaptive { " adaptive" } else { "" },
            g.tokens.len(),
            a.tokens.len(),
            a_dec / s_dec.max(1e-9),
            st.accepted,
            st.drafted,
            100.0 * st.acceptance_rate(),
            st.mean_accepted_length(),
            st.rounds,
            st.plain_steps,
            ms(st.draft_prefill_time),
            ms(st.draft_model_time),
            st.draft_calls,
            ms(st.draft_pass_time()),
            ms(st.target_model_time),
            st.target_positions,
            ms(st.overhead_time()),
            g.tokens == a.tokens
        );
    }
}

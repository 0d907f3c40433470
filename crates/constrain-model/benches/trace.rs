//! The step trace's cost: the same request decoded with `generate` and with
//! `generate_traced` (what `--trace FILE` runs), on the real
//! Qwen2.5-Coder-0.5B, one thread, greedy and at temperature 1 (seeded),
//! runs interleaved so that load drifts hit both. Prints the median decode
//! time (prefill excluded, `GenerationStats::decode_time`) and CPU time of
//! `--reps` runs (default 5) of each, and the trace's overhead in percent;
//! also the cost of recording one step alone (`trace::sampled_step` over the
//! model's real logits and mask), against one decode step.
//!
//! `cargo bench -p constrain-model --bench trace [-- --reps 5 --max-tokens
//! 60]`. Skips with a message when the model is absent.

use constrain::{Compiler, CompilerConfig, Matcher, Source};
use constrain_model::generate::{generate, generate_traced, GenerateConfig};
use constrain_model::prompt::{chatml, schema_system_message, Message};
use constrain_model::LanguageModel;
use std::time::Instant;

mod common;
use common::{home, median, timed, Args};

fn main() {
    let Some(args) = Args::for_bench("trace") else {
        return;
    };
    let reps = args.value("--reps", 5);
    let max_tokens = args.value("--max-tokens", 60);
    let path = home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !path.exists() {
        eprintln!(
            "skipping: {} not found (scripts/fetch-assets)",
            path.display()
        );
        return;
    }
    constrain_model::set_threads(1).expect("threads");
    let loaded = constrain_model::load(&path, &constrain_model::TokenizerSource::Gguf)
        .expect("load the 0.5B");
    let (mut model, tok, vocab) = (loaded.model, loaded.tokenizer, loaded.vocab);
    let root = constrain_testkit::assets::repo_root();
    let text = std::fs::read_to_string(root.join("schemas/person.json")).expect("person.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("schema JSON");
    let index = Compiler::new(vocab.clone(), CompilerConfig::default())
        .compile(&Source::json_schema(v.clone()))
        .expect("compile")
        .index()
        .clone();
    let m = Matcher::from_index(index);
    let prompt = tok
        .encode(&chatml(&[
            Message::system(schema_system_message(&v)),
            Message::user("Describe a person named Ada."),
        ]))
        .expect("prompt");
    println!(
        "trace overhead, Qwen2.5-Coder-0.5B Q4_K_M, 1 thread, schemas/person.json, max_tokens {max_tokens}, median of {reps}"
    );
    for (name, config) in [
        ("greedy", GenerateConfig::greedy(max_tokens)),
        (
            "T=1 seed 7",
            GenerateConfig::default().max_tokens(max_tokens).seed(7),
        ),
    ] {
        let (mut plain, mut traced, mut plain_cpu, mut traced_cpu) =
            (vec![], vec![], vec![], vec![]);
        let mut tokens = 0;
        let mut steps = 0;
        for _ in 0..reps {
            let (_, c, g) = timed(|| {
                let mut mm = m.clone();
                generate(
                    &mut model,
                    &vocab,
                    Some(&tok),
                    Some(&mut mm),
                    &prompt,
                    &config,
                    &mut |_| {},
                )
                .expect("generate")
            });
            plain_cpu.push(c);
            plain.push(g.stats.decode_time.as_secs_f64() * 1e3);
            let (_, c, (t, s)) = timed(|| {
                let mut mm = m.clone();
                generate_traced(
                    &mut model,
                    &vocab,
                    Some(&tok),
                    Some(&mut mm),
                    &prompt,
                    &config,
                    &mut |_| {},
                )
                .expect("generate_traced")
            });
            traced_cpu.push(c);
            traced.push(t.stats.decode_time.as_secs_f64() * 1e3);
            assert_eq!(t.tokens, g.tokens, "the trace changed the output");
            tokens = g.tokens.len();
            steps = s.len();
        }
        let (p, t) = (median(plain), median(traced));
        let (pc, tc) = (median(plain_cpu), median(traced_cpu));
        println!(
            "{name:<11} {tokens} tokens ({steps} steps): decode {p:.0} ms plain, {t:.0} ms traced: {:+.1} % (cpu incl. prefill {pc:.0} / {tc:.0} ms: {:+.1} %)",
            100.0 * (t / p - 1.0),
            100.0 * (tc / pc - 1.0)
        );
    }
    // One step's recording alone, on the logits after the prompt.
    let logits = model.forward(&prompt, 0).expect("forward");
    let step_ms = {
        let t0 = Instant::now();
        let n = 5;
        for _ in 0..n {
            model
                .forward(&prompt[prompt.len() - 1..], prompt.len() - 1)
                .ok();
            model.truncate(prompt.len() - 1);
        }
        t0.elapsed().as_secs_f64() * 1e3 / n as f64
    };
    let allowed = m.allowed();
    let chosen = allowed.iter().next().expect("an allowed token");
    let n = 50;
    for (what, mask) in [("the start's mask", Some(allowed)), ("unconstrained", None)] {
        let t0 = Instant::now();
        for _ in 0..n {
            std::hint::black_box(constrain_model::trace::sampled_step(
                0,
                std::hint::black_box(&logits),
                mask,
                chosen,
                &vocab,
            ));
        }
        let rec_ms = t0.elapsed().as_secs_f64() * 1e3 / n as f64;
        println!(
            "one step's record, {what} ({} allowed of {}): {rec_ms:.3} ms; one decode step {step_ms:.1} ms: {:.1} %",
            mask.map_or(logits.len(), |a| a.len()),
            logits.len(),
            100.0 * rec_ms / step_ms
        );
    }
}

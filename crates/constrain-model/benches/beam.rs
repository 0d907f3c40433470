//! Beam search's cost against greedy's on the real Qwen2.5-Coder-0.5B, one
//! thread (`set_threads(1)`), on example schemas: for each, greedy
//! (`generate`, jump-forward on) then `beam_search` with `--beams` (default
//! 4), batched (all live hypotheses in one pass) and, with `--one-by-one`,
//! also stepping hypotheses one by one as before. Prints per schema the
//! median wall time and CPU time (all threads, `/proc/self/task/*/schedstat`,
//! less inflated by a loaded machine) of `--reps` runs (default 3),
//! prefill included (the same prompt pass in both), model passes, tokens,
//! and the ratio beam / greedy; then the ratio of the summed medians.
//!
//! `cargo bench -p constrain-model --bench beam [-- --beams 4 --reps 3
//! --max-tokens 60 --one-by-one]`. Skips with a message when the model is
//! absent (`$CONSTRAIN_HOME`, default `~/.cache/constrain`).

use constrain::{Compiler, CompilerConfig, Matcher, Source};
use constrain_model::generate::{beam_search, BeamConfig, OneByOne};
use constrain_model::generate::{generate, GenerateConfig};
use constrain_model::prompt::{chatml, schema_system_message, Message};

mod common;
use common::{home, median, timed, Args};

fn main() {
    let Some(args) = Args::for_bench("beam") else {
        return;
    };
    let reps = args.value("--reps", 3);
    let beams = args.value("--beams", 4);
    let max_tokens = args.value("--max-tokens", 60);
    let one_by_one = args.flag("--one-by-one");
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
    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    let root = constrain_testkit::assets::repo_root();
    println!(
        "beam {beams} vs greedy, Qwen2.5-Coder-0.5B Q4_K_M, 1 thread, max_tokens {max_tokens}, median of {reps}"
    );
    println!(
        "{:<18} {:>6} {:>9} {:>9} {:>7} | {:>6} {:>9} {:>9} {:>7} | {:>11}",
        "schema",
        "tokens",
        "greedy ms",
        "cpu ms",
        "passes",
        "tokens",
        "beam ms",
        "cpu ms",
        "passes",
        "ratio w/cpu"
    );
    let mut sums = [0.0f64; 6];
    for (schema, user) in [
        ("person.json", "Describe a person named Ada."),
        ("weather.json", "What is the weather like in Paris?"),
        ("tool_call.json", "Call a tool to get the weather in Paris."),
        ("record.json", "Make up a record."),
    ] {
        let Ok(text) = std::fs::read_to_string(root.join("schemas").join(schema)) else {
            eprintln!("skipping {schema}: not found");
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).expect("schema JSON");
        let index = compiler
            .compile(&Source::json_schema(v.clone()))
            .expect("compile")
            .index()
            .clone();
        let m = Matcher::from_index(index);
        let prompt = tok
            .encode(&chatml(&[
                Message::system(schema_system_message(&v)),
                Message::user(user),
            ]))
            .expect("prompt");
        let gcfg = GenerateConfig::greedy(max_tokens);
        let bcfg = BeamConfig::default()
            .beams(beams)
            .length_penalty(1.0)
            .max_tokens(max_tokens)
            .jump_forward(true);
        let (mut gw, mut gc, mut bw, mut bc, mut ow, mut oc) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let (mut gt, mut gp, mut bt, mut bp, mut op) = (0, 0, 0, 0, 0);
        for _ in 0..reps {
            let (w, c, g) = timed(|| {
                let mut mm = m.clone();
                generate(
                    &mut model,
                    &vocab,
                    Some(&tok),
                    Some(&mut mm),
                    &prompt,
                    &gcfg,
                    &mut |_| {},
                )
                .expect("greedy")
            });
            gw.push(w);
            gc.push(c);
            (gt, gp) = (g.tokens.len(), g.stats.model_calls);
            let (w, c, b) = timed(|| {
                beam_search(&mut model, &vocab, Some(&tok), &m, &prompt, &bcfg).expect("beam")
            });
            bw.push(w);
            bc.push(c);
            (bt, bp) = (b.tokens.len(), b.stats.model_calls);
            if one_by_one {
                let (w, c, o) = timed(|| {
                    beam_search(
                        &mut OneByOne(&mut model),
                        &vocab,
                        Some(&tok),
                        &m,
                        &prompt,
                        &bcfg,
                    )
                    .expect("beam")
                });
                assert_eq!(o.tokens, b.tokens, "one by one differs from batched");
                ow.push(w);
                oc.push(c);
                op = o.stats.model_calls;
            }
        }
        let (gw, gc, bw, bc) = (median(gw), median(gc), median(bw), median(bc));
        println!(
            "{schema:<18} {gt:>6} {gw:>9.0} {gc:>9.0} {gp:>7} | {bt:>6} {bw:>9.0} {bc:>9.0} {bp:>7} | {:>5.2}/{:<5.2}",
            bw / gw,
            bc / gc
        );
        sums[0] += gw;
        sums[1] += gc;
        sums[2] += bw;
        sums[3] += bc;
        if one_by_one {
            let (ow, oc) = (median(ow), median(oc));
            println!(
                "{:<18} one by one: {ow:.0} ms wall, {oc:.0} ms cpu, {op} passes: {:.2}/{:.2} of greedy",
                "",
                ow / gw,
                oc / gc
            );
            sums[4] += ow;
            sums[5] += oc;
        }
    }
    println!(
        "all schemas: beam {beams} / greedy = {:.2} wall, {:.2} cpu",
        sums[2] / sums[0],
        sums[3] / sums[1]
    );
    if one_by_one {
        println!(
            "all schemas: one by one / greedy = {:.2} wall, {:.2} cpu",
            sums[4] / sums[0],
            sums[5] / sums[1]
        );
    }
}

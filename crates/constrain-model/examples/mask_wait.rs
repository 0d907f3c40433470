//! How long the steps of a real generation wait for their masks, with and
//! without computing each mask during the model's pass
//! (`GenerateConfig::mask_overlap`), over MaskBench schemas and the Qwen
//! model.
//!
//! For each schema: a fresh compile (so the lazy index's first visits are
//! paid inside this generation, as for a new schema on a server), greedy
//! decoding with the schema shown in the system message, once without the
//! overlap and once with it; the two outputs must be the same. Prints per
//! schema and in all: masked steps, the steps that waited for their mask,
//! the total and longest wait, decode tokens/s.
//!
//! ```text
//! cargo run --release -p constrain-model --example mask_wait -- [--max-tokens N] [FILE...]
//! ```
//!
//! Without files: the first file that compiles of each of eight MaskBench groups in
//! `../shared/corpora/maskbench-dev`. Needs `scripts/fetch-assets` (the
//! 0.5B GGUF model).

use constrain::{Compiler, CompilerConfig, Matcher, Source};
use constrain_model::generate::{generate, GenerateConfig, Generation, MaskStats};
use constrain_model::{prompt, TokenizerSource};
use constrain_testkit::assets;
use std::path::PathBuf;
use std::time::Duration;

const GROUPS: [&str; 8] = [
    "Github_easy",
    "Github_medium",
    "Github_hard",
    "Glaiveai2K",
    "Kubernetes",
    "JsonSchemaStore",
    "Snowplow",
    "WashingtonPost",
];

fn default_files() -> Vec<PathBuf> {
    let Some(dir) = assets::corpora().map(|c| c.join("maskbench-dev")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    // Per group, its first file (by name) whose schema compiles.
    let Some(vocab) = assets::qwen_vocab() else {
        return Vec::new();
    };
    let compiler = Compiler::new(vocab, CompilerConfig::default());
    let compiles = |p: &PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|d| d.get("schema").cloned())
            .is_some_and(|s| compiler.compile(&Source::json_schema(s)).is_ok())
    };
    GROUPS
        .iter()
        .filter_map(|g| {
            names
                .iter()
                .filter(|n| n.starts_with(g))
                .map(|n| dir.join(n))
                .find(compiles)
        })
        .collect()
}

#[derive(Default)]
struct Total {
    mask: MaskStats,
    tokens: usize,
    decode: Duration,
    calls: usize,
}

impl Total {
    fn add(&mut self, g: &Generation) {
        let m = &g.stats.mask;
        self.mask.steps += m.steps;
        self.mask.waited += m.waited;
        self.mask.wait_time += m.wait_time;
        self.mask.max_wait = self.mask.max_wait.max(m.max_wait);
        self.tokens += g.stats.generated_tokens;
        self.decode += g.stats.decode_time;
        self.calls += g.stats.model_calls;
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut max_tokens = 128;
    if let Some(i) = args.iter().position(|a| a == "--max-tokens") {
        max_tokens = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .expect("--max-tokens N");
        args.drain(i..i + 2);
    }
    let mut files: Vec<PathBuf> = args.into_iter().map(PathBuf::from).collect();
    if files.is_empty() {
        files = default_files();
    }
    if files.is_empty() {
        eprintln!("skipping: no schema files (give some, or put MaskBench at ../shared/corpora)");
        return;
    }
    let model_path = assets::constrain_home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !model_path.exists() {
        eprintln!(
            "skipping: {} not found (run scripts/fetch-assets)",
            model_path.display()
        );
        return;
    }
    let mut loaded =
        constrain_model::load(&model_path, &TokenizerSource::Gguf).expect("the model loads");
    eprintln!(
        "model {} ({} threads), max_tokens {max_tokens}, greedy",
        model_path.display(),
        constrain_model::threads()
    );
    let mut totals = [Total::default(), Total::default()];
    println!(
        "{:<44} {:>6} {:>6} | {:>13} {:>9} {:>8} | {:>13} {:>9} {:>8} | same",
        "schema",
        "tokens",
        "masked",
        "waited (off)",
        "wait ms",
        "tok/s",
        "waited (on)",
        "wait ms",
        "tok/s"
    );
    for file in &files {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{name}: {e}");
                continue;
            }
        };
        let doc: serde_json::Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("{name}: {e}");
                continue;
            }
        };
        let schema = doc.get("schema").cloned().unwrap_or(doc);
        let system = prompt::schema_system_message(&schema);
        let tokens = prompt::chatml(&[
            prompt::Message::system(&system),
            prompt::Message::user("Give one example instance."),
        ]);
        let prompt_ids = loaded
            .tokenizer
            .encode(&tokens)
            .expect("the prompt tokenizes");
        let mut outs = Vec::new();
        for overlap in [false, true] {
            // A fresh compile per run: each pays its own first visits.
            let compiler = Compiler::new(loaded.vocab.clone(), CompilerConfig::default());
            let compiled = match compiler.compile(&Source::json_schema(schema.clone())) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{name}: skipped: {e}");
                    break;
                }
            };
            let mut m: Matcher = compiled.matcher();
            let config = GenerateConfig::greedy(max_tokens)
                .max_tokens(max_tokens)
                .mask_overlap(overlap);
            match generate(
                &mut loaded.model,
                &loaded.vocab,
                Some(&loaded.tokenizer),
                Some(&mut m),
                &prompt_ids,
                &config,
                &mut |_| {},
            ) {
                Ok(g) => outs.push(g),
                Err(e) => {
                    eprintln!("{name}: skipped: {e}");
                    break;
                }
            }
        }
        let [off, on] = &outs[..] else { continue };
        totals[0].add(off);
        totals[1].add(on);
        let cell = |m: &MaskStats| format!("{}/{}", m.waited, m.steps);
        println!(
            "{:<44} {:>6} {:>6} | {:>13} {:>9.3} {:>8.1} | {:>13} {:>9.3} {:>8.1} | {}",
            name.chars().take(44).collect::<String>(),
            on.stats.generated_tokens,
            on.stats.mask.steps,
            cell(&off.stats.mask),
            ms(off.stats.mask.wait_time),
            off.stats.decode_tokens_per_sec(),
            cell(&on.stats.mask),
            ms(on.stats.mask.wait_time),
            on.stats.decode_tokens_per_sec(),
            if off.tokens == on.tokens { "yes" } else { "NO" }
        );
        assert_eq!(
            off.tokens, on.tokens,
            "{name}: the overlap changed the output"
        );
    }
    for (label, t) in ["without overlap", "with overlap"].iter().zip(&totals) {
        println!(
            "{label}: {} of {} masked steps waited ({:.2} %), {:.2} ms of waiting in all (longest {:.3} ms); {} tokens, {} passes, {:.1} tok/s",
            t.mask.waited,
            t.mask.steps,
            100.0 * t.mask.waited_share(),
            ms(t.mask.wait_time),
            ms(t.mask.max_wait),
            t.tokens,
            t.calls,
            t.tokens as f64 / t.decode.as_secs_f64().max(1e-9),
        );
    }
}

//! `constrain compile` (build an index, print its figures) and `constrain
//! check` (walk the guide over a text's canonical tokens).

use super::common::{compile, source, IndexArgs, SourceArgs};
use super::schema_args::SchemaArgs;
use constrain::Source;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CompileArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    index: IndexArgs,
    #[command(flatten)]
    schema: SchemaArgs,
    /// Print the figures as one JSON object.
    #[arg(long)]
    json: bool,
    /// Print the regex the constraint compiles to (on stdout, before the figures).
    #[arg(long)]
    print_regex: bool,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    index: IndexArgs,
    #[command(flatten)]
    schema: SchemaArgs,
    /// The text to check (may begin with `-`: `--text -5` or `--text=-5`).
    #[arg(long, allow_hyphen_values = true)]
    text: String,
}

pub fn run_compile(a: CompileArgs) -> anyhow::Result<ExitCode> {
    let (src, what) = source(&a.source, &a.schema)?;
    let vocab = a.index.vocabulary()?;
    let t = std::time::Instant::now();
    let built = compile(&src, &what, vocab, &a.index)?;
    let total = t.elapsed();
    let st = built.index().stats();
    let cs = built.stats();
    if a.print_regex {
        if cs.fragments > 0 {
            println!("{}", fragments_text(&src)?);
        } else {
            println!("{}", regex_text(&src)?);
        }
    }
    if a.json {
        let v = serde_json::json!({
            "dfa_states": cs.dfa_states,
            "fragments": cs.fragments,
            "lazy_fragments": cs.lazy_fragments,
            "index_states": st.states,
            "distinct_masks": st.distinct_masks,
            "byte_classes": st.byte_classes,
            "horizon_classes": st.horizon_classes,
            "regex_len": cs.regex_len,
            "schema_ms": cs.schema_time.as_secs_f64() * 1e3,
            "dfa_ms": cs.dfa_time.as_secs_f64() * 1e3,
            "index_ms": st.build_time.as_secs_f64() * 1e3,
            "build_ms": total.as_secs_f64() * 1e3,
            "dfa_memory_bytes": cs.dfa_memory,
            "index_memory_bytes": st.memory_bytes,
            "eager": !a.index.lazy && !built.is_lazy(),
            "lazy_dfa": built.is_lazy(),
            "logits_width": built.vocab().logits_width(),
            "stop_tokens": IndexArgs::stop_tokens_json(built.vocab()),
        });
        println!("{v}");
    } else {
        if cs.fragments > 0 {
            println!(
                "DFA states:      {} in {} grammar fragments (pushdown engine: stack \
                 configurations and their masks are built on demand)",
                cs.dfa_states, cs.fragments
            );
        } else if built.is_lazy() {
            println!(
                "DFA states:      {} determinized up front; the rest on demand \
                 (more than --lazy-states {})",
                cs.dfa_states, a.index.lazy_states
            );
        } else {
            println!("DFA states:      {}", cs.dfa_states);
        }
        println!("index states:    {}", st.states);
        println!(
            "distinct masks:  {}{}",
            st.distinct_masks,
            if a.index.lazy || built.is_lazy() {
                " (lazy: computed on first visit)"
            } else {
                ""
            }
        );
        println!(
            "build time:      {:.1} ms (DFA {:.1} ms, index {:.1} ms)",
            total.as_secs_f64() * 1e3,
            cs.dfa_time.as_secs_f64() * 1e3,
            st.build_time.as_secs_f64() * 1e3
        );
        println!(
            "memory:          {:.2} MB (DFA {:.2} MB, index {:.2} MB)",
            (cs.dfa_memory + st.memory_bytes) as f64 / 1e6,
            cs.dfa_memory as f64 / 1e6,
            st.memory_bytes as f64 / 1e6
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_check(a: CheckArgs) -> anyhow::Result<ExitCode> {
    let (src, what) = source(&a.source, &a.schema)?;
    let (vocab, tok) = a.index.vocabulary_and_tokenizer()?;
    let built = compile(&src, &what, vocab.clone(), &a.index)?;
    let tokens = tok.encode(&a.text)?;
    let mut g = built.matcher();
    let mut byte = 0usize;
    for (i, &t) in tokens.iter().enumerate() {
        if g.advance(t).is_err() {
            println!(
                "rejected: token {i} ({}, id {t}) at byte {byte} leaves the language{}",
                vocab.describe(t),
                // A grammar with a stack says when a limit cut the language.
                built
                    .index()
                    .lazy_limit_error()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            );
            return Ok(ExitCode::from(1));
        }
        byte += vocab.token_bytes(t).map_or(0, |b| b.len());
    }
    if !g.is_accepting() {
        println!("rejected: the text is incomplete after {} tokens (byte {byte}): EOS is not allowed there", tokens.len());
        return Ok(ExitCode::from(1));
    }
    println!(
        "accepted: {} tokens, {byte} bytes, EOS allowed at the end",
        tokens.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// The fragments a source compiled to on the pushdown engine
/// (`--print-regex` for a recursive schema: one `NAME ::= REGEX` line per
/// fragment, calls written `(?call:NAME)`; a GBNF grammar prints its
/// lowered form, recursion unrolled, as before).
fn fragments_text(src: &Source) -> anyhow::Result<String> {
    let schema = match src {
        Source::JsonSchema { schema, options } => (schema.clone(), options),
        Source::Tools { tools, options } => (constrain::schema::tools_schema(tools)?, options),
        _ => return regex_text(src),
    };
    Ok(constrain::schema::regex::compile_fragments(&schema.0, schema.1)?.display())
}

/// The regex text a source compiles through (`--print-regex`).
fn regex_text(src: &Source) -> anyhow::Result<String> {
    Ok(match src {
        Source::Regex(p) => p.clone(),
        Source::Grammar(g) => g.pattern.clone(),
        // The lowered syntax tree, printed as a regex (compiling never
        // goes through this text).
        Source::Gbnf { grammar, options } => {
            constrain::grammar::gbnf::lower(grammar, options)?.to_string()
        }
        Source::Lark { grammar, options } => {
            constrain::grammar::gbnf::lower(&grammar.gbnf, options)?.to_string()
        }
        Source::JsonSchema { schema, options } => {
            constrain::schema::compile(schema, options)?.regex
        }
        Source::Tools { tools, options } => {
            constrain::schema::compile(&constrain::schema::tools_schema(tools)?, options)?.regex
        }
        Source::StructuralTag { tag, options } => tag.lowered_text(options)?,
    })
}

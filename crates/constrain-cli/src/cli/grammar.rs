//! `constrain grammar convert --from gbnf|lark --to lark|gbnf FILE`: one
//! grammar dialect written in the other, where the conversion is exact
//! (`constrain::grammar::convert`).

use anyhow::Context;
use constrain::grammar::convert::{gbnf_to_lark, lark_to_gbnf};
use constrain::grammar::gbnf::Gbnf;
use constrain::grammar::lark::Lark;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct GrammarArgs {
    #[command(subcommand)]
    command: GrammarCommand,
}

#[derive(clap::Subcommand)]
enum GrammarCommand {
    /// Write a GBNF grammar as Lark or a Lark grammar as GBNF, with the same language; stdout.
    Convert(ConvertArgs),
}

/// A grammar dialect.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    /// llama.cpp's GBNF.
    Gbnf,
    /// llguidance's Lark.
    Lark,
}

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The dialect of FILE.
    #[arg(long, value_enum)]
    from: Dialect,
    /// The dialect to write.
    #[arg(long, value_enum)]
    to: Dialect,
    /// The grammar file (`-` for stdin).
    file: PathBuf,
}

pub fn run(a: GrammarArgs) -> anyhow::Result<ExitCode> {
    let GrammarCommand::Convert(c) = a.command;
    let text = if c.file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(&c.file).with_context(|| format!("reading {}", c.file.display()))?
    };
    let name = c
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "grammar".into());
    let out = match (c.from, c.to) {
        (Dialect::Gbnf, Dialect::Lark) => {
            let g = Gbnf::parse(&name, &text).context("the GBNF grammar")?;
            gbnf_to_lark(&g).context("writing it as Lark")?
        }
        (Dialect::Lark, Dialect::Gbnf) => {
            let g = Lark::parse(&name, &text).context("the Lark grammar")?;
            lark_to_gbnf(&g).context("writing it as GBNF")?
        }
        (Dialect::Gbnf, Dialect::Gbnf) => {
            Gbnf::parse(&name, &text).context("the GBNF grammar")?;
            text
        }
        (Dialect::Lark, Dialect::Lark) => {
            Lark::parse(&name, &text).context("the Lark grammar")?;
            text
        }
    };
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

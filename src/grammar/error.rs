//! Why a grammar file could not be used: [`GrammarError`] names the file,
//! and wraps a GBNF file's [`GbnfError`] (line and column) as it is.

use super::gbnf::GbnfError;
use std::path::PathBuf;

/// Why a grammar file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    #[error("cannot read grammar {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("grammar {path} holds no pattern after its comment header")]
    Empty { path: PathBuf },
    /// A GBNF file that does not parse (the error names line and column).
    #[error("grammar {path}: {source}")]
    Gbnf {
        path: PathBuf,
        #[source]
        source: GbnfError,
    },
    /// A Lark file that does not parse or is refused (the error names line
    /// and column).
    #[error("grammar {path}: {source}")]
    Lark {
        path: PathBuf,
        #[source]
        source: super::lark::error::LarkError,
    },
}

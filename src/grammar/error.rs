//! Why a grammar file could not be used: [`GrammarError`] names the file,
//! and wraps a GBNF file's [`GbnfError`] (line and column) as it is.

use super::gbnf::GbnfError;
use std::path::PathBuf;

/// Why a grammar file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    /// The file could not be read.
    #[error("cannot read grammar {path}: {source}")]
    Io {
        /// The grammar file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A regex grammar file with nothing after its comment header.
    #[error("grammar {path} holds no pattern after its comment header")]
    Empty {
        /// The grammar file.
        path: PathBuf,
    },
    /// A GBNF file that does not parse (the error names line and column).
    #[error("grammar {path}: {source}")]
    Gbnf {
        /// The grammar file.
        path: PathBuf,
        /// The GBNF error, with its line and column.
        #[source]
        source: GbnfError,
    },
    /// A Lark file that does not parse or is refused (the error names line
    /// and column).
    #[error("grammar {path}: {source}")]
    Lark {
        /// The grammar file.
        path: PathBuf,
        /// The Lark error, with its line and column.
        #[source]
        source: super::lark::error::LarkError,
    },
}

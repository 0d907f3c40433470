//! # Regex grammar files (`grammars/*.regex`)
//!
//! A grammar file is a regex with a comment header: the leading lines that are
//! `#` alone or start with `# ` describe what it matches; every following line
//! is part of the pattern (joined without separators, so long patterns can be
//! wrapped). A pattern may itself start with `#` as long as no space follows.

use std::path::{Path, PathBuf};

/// A grammar read from a file.
#[derive(Clone, Debug)]
pub struct Grammar {
    /// File stem (`iso-date`).
    pub name: String,
    /// The comment header, without the `# ` markers.
    pub description: String,
    /// The regex (full-match semantics).
    pub pattern: String,
}

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
        source: super::gbnf::GbnfError,
    },
    /// A Lark file that does not parse or is refused (the error names line
    /// and column).
    #[error("grammar {path}: {source}")]
    Lark {
        path: PathBuf,
        #[source]
        source: super::lark::LarkError,
    },
}

impl Grammar {
    /// Parses the text of a grammar file.
    pub fn parse(name: &str, text: &str) -> Option<Grammar> {
        let mut description = Vec::new();
        let mut pattern = String::new();
        let mut in_header = true;
        for line in text.lines() {
            if in_header && (line == "#" || line.starts_with("# ")) {
                description.push(line.trim_start_matches('#').trim());
                continue;
            }
            in_header = false;
            pattern.push_str(line.trim_end_matches('\r'));
        }
        (!pattern.is_empty()).then(|| Grammar {
            name: name.to_string(),
            description: description.join(" "),
            pattern,
        })
    }

    /// Reads a grammar file.
    pub fn load(path: impl AsRef<Path>) -> Result<Grammar, GrammarError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GrammarError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Grammar::parse(&name, &text).ok_or_else(|| GrammarError::Empty {
            path: path.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Grammar;

    #[test]
    fn header_and_wrapped_pattern() {
        let g = Grammar::parse("hex", "# A colour.\n#\n# Two lines.\n#[0-9]{3}\n|x\n").unwrap();
        assert_eq!(g.pattern, "#[0-9]{3}|x");
        assert_eq!(g.description, "A colour.  Two lines.");
        assert!(Grammar::parse("e", "# only a header\n").is_none());
    }
}

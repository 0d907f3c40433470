//! Core errors as Python exceptions: `CompileError(ValueError)` with the
//! schema keyword and JSON Pointer as attributes, vocabulary errors as
//! `ValueError` (`OSError` for a file that cannot be read), matcher errors as
//! `ValueError`.

use constrain::schema::SchemaError;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    constrain,
    CompileError,
    PyValueError,
    "A source that did not compile. `keyword` is the schema keyword at fault \
     (or None), `pointer` its JSON Pointer into the schema (\"\" is the root; \
     None when the error is not about a place in a schema), `kind` the stage: \
     \"schema\", \"regex\", \"index\", \"grammar\" or \"structural_tag\"."
);

/// The keyword a schema error is about, when it names one.
fn keyword(e: &SchemaError) -> Option<String> {
    match e {
        SchemaError::Unsupported { keyword, .. } | SchemaError::Unknown { keyword, .. } => {
            Some(keyword.clone())
        }
        SchemaError::UnsupportedValue { what, .. } | SchemaError::TooBig { what, .. } => {
            Some(what.clone())
        }
        SchemaError::Ref { .. } => Some("$ref".into()),
        SchemaError::OneOfOverlap { .. } => Some("oneOf".into()),
        SchemaError::Pattern { .. } => Some("pattern".into()),
        SchemaError::Contradiction { .. }
        | SchemaError::Invalid { .. }
        | SchemaError::Empty { .. } => None,
    }
}

/// A `CompileError` with its attributes set.
pub fn compile_error(
    py: Python<'_>,
    message: String,
    kind: &str,
    keyword: Option<String>,
    pointer: Option<String>,
) -> PyErr {
    let err = CompileError::new_err(message);
    let v = err.value(py);
    // Setting attributes on a fresh exception instance cannot fail short of
    // memory exhaustion; the error itself is still raised if it does.
    let _ = v.setattr("kind", kind);
    let _ = v.setattr("keyword", keyword);
    let _ = v.setattr("pointer", pointer);
    err
}

/// The Python form of a core compile error.
pub fn from_compile(py: Python<'_>, e: constrain::CompileError) -> PyErr {
    use constrain::CompileError as E;
    let msg = e.to_string();
    match &e {
        E::Schema(s) => compile_error(
            py,
            msg,
            "schema",
            keyword(s),
            Some(s.pointer().as_str().to_string()),
        ),
        E::Dfa(_) => compile_error(py, msg, "regex", None, None),
        E::Index(_) => compile_error(py, msg, "index", None, None),
        E::Cancelled | E::TimedOut { .. } => compile_error(py, msg, "cancelled", None, None),
        E::Grammar(_) | E::Gbnf(_) | E::Lark(_) => compile_error(py, msg, "grammar", None, None),
        E::Tag(t) => compile_error(
            py,
            msg,
            "structural_tag",
            None,
            t.pointer().map(|p| p.as_str().to_string()),
        ),
    }
}

/// The Python form of a vocabulary error.
pub fn from_vocab(e: constrain::VocabError) -> PyErr {
    match e {
        constrain::VocabError::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

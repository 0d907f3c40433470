//! # constrain's Python package: `constrain._core`
//!
//! The PyO3 side of the `constrain` wheel. It wraps the core crate, and
//! reimplements nothing: a [`tokenizer::TokenizerInfo`] holds an
//! `Arc<Vocabulary>`, a [`compiler::Compiler`] an `Arc<constrain::Compiler>`
//! (with its LRU cache), a [`compiler::Compiled`] the `Arc<Compiled>` it
//! returned, and a [`matcher::Matcher`] one `constrain::Matcher`. The names
//! and signatures follow XGrammar's Python API (`TokenizerInfo`,
//! `GrammarCompiler`, `GrammarMatcher`), which vLLM, SGLang and transformers
//! integrations already call; the pure-Python part of the package
//! (`python/constrain/`) re-exports these classes and adds numpy helpers and
//! the engine adapters.
//!
//! ## Invariants
//!
//! * No Python error is a crash: every core error becomes a Python exception
//!   ([`errors`]), every size and id from Python is checked before use.
//! * Compiling and every bitmask fill run with the GIL released.
//! * Bitmasks are reached through the buffer protocol ([`buffer`]):
//!   `PyObject_GetBuffer` from Rust on CPython >= 3.11 (stable ABI there),
//!   else the Python helper `constrain._buffer` (`memoryview` + `ctypes`:
//!   the C buffer API is not in the limited API before 3.11, and the wheel
//!   is abi3 for 3.9+), which also words every refusal. Either checks dtype
//!   (int32), C-contiguity, writability and shape, and holds the export for
//!   the whole fill, so the buffer can neither move nor be freed while the
//!   GIL is released. Nothing holds a bitmask past the call, except a
//!   matcher's last one on the helper path.
//! * The batch fill runs on the calling thread and a pool of persistent
//!   workers ([`pool`]).

mod buffer;
mod compiler;
mod errors;
mod matcher;
mod pool;
mod tokenizer;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CompileError", py.get_type::<errors::CompileError>())?;
    m.add_class::<tokenizer::TokenizerInfo>()?;
    m.add_class::<compiler::Compiler>()?;
    m.add_class::<compiler::Compiled>()?;
    m.add_class::<matcher::Matcher>()?;
    m.add_function(wrap_pyfunction!(matcher::fill_next_token_bitmask_batch, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::_fill_stats, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

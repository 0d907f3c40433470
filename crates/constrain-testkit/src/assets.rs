//! Locating the real assets (`$CONSTRAIN_HOME`) and corpora (`../shared`)
//! for tests, benches and examples, skipping with a message when absent.

use constrain::vocab::{TextTokenizer, Vocabulary, QWEN_LOGITS_WIDTH};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// `$CONSTRAIN_HOME`, default `~/.cache/constrain`.
pub fn constrain_home() -> PathBuf {
    std::env::var_os("CONSTRAIN_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        })
}

/// The Qwen `tokenizer.json` under the assets directory, or `None` (with a
/// "skipping" message on stderr) when it has not been fetched.
pub fn tokenizer_path() -> Option<PathBuf> {
    let p = constrain_home().join("tokenizer.json");
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipping: Qwen tokenizer not found at {} (run scripts/fetch-assets)",
            p.display()
        );
        None
    }
}

/// The Qwen vocabulary at the model's logits width, loaded once per test binary.
pub fn qwen_vocab() -> Option<Arc<Vocabulary>> {
    static V: OnceLock<Option<Arc<Vocabulary>>> = OnceLock::new();
    V.get_or_init(|| {
        let p = tokenizer_path()?;
        let v = Vocabulary::from_tokenizer_json_file(&p).expect("tokenizer.json parses");
        Some(Arc::new(
            v.with_logits_width(QWEN_LOGITS_WIDTH).expect("width"),
        ))
    })
    .clone()
}

/// The Qwen text tokenizer, loaded once per test binary; `None` when
/// `tokenizer.json` has not been fetched.
pub fn qwen_tokenizer() -> Option<&'static TextTokenizer> {
    static T: OnceLock<Option<TextTokenizer>> = OnceLock::new();
    T.get_or_init(|| Some(TextTokenizer::from_file(tokenizer_path()?).expect("tokenizer loads")))
        .as_ref()
}

/// `../shared/corpora` next to the repository, when present.
pub fn corpora() -> Option<PathBuf> {
    let p = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpora"
    ));
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!(
            "skipping: corpora not found at {} (../shared is absent)",
            p.display()
        );
        None
    }
}

/// The repository root (the workspace), where `schemas/`, `grammars/`,
/// `fuzz/` and `tests/baselines/` are.
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

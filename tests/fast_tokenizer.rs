//! The tokenizer built from the vocabulary cache's BPE tables
//! (`TextTokenizer::from_tables`) gives exactly the ids of the full
//! `tokenizers::Tokenizer` read from the same tokenizer.json
//! (`TextTokenizer::from_file`): on hand-picked texts (ASCII, code, JSON,
//! whitespace runs, CJK, emoji, contractions, numbers, special and added
//! tokens, text NFC changes) and on seeded random texts, for Qwen and for
//! the other byte-level tokenizers `scripts/fetch-assets --tokenizers`
//! fetches. Files the tables do not reproduce (SentencePiece, DeepSeek V3)
//! get no tables. Absent tokenizers skip with a message.

use constrain::vocab::{CacheStatus, TextTokenizer, VocabCache};
use constrain_testkit::assets::{constrain_home, tokenizer_path};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "constrain-fast-tokenizer-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn other_tokenizer(name: &str) -> Option<PathBuf> {
    let p = constrain_home()
        .join("tokenizers")
        .join(name)
        .join("tokenizer.json");
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipping {name}: tokenizer not found at {} (run scripts/fetch-assets --tokenizers)",
            p.display()
        );
        None
    }
}

const TEXTS: &[&str] = &[
    "",
    "a",
    "Hello, world!",
    "I'll be there; you'd've known. It's WE'RE THEY'LL she'S",
    "don't  'tis 'S 'T 'Re ſ 'ſ 'ſt",
    "  \n\n  x",
    "   ",
    "\n",
    "\r\n\r\n",
    "a  \n b\t\t\tc \u{a0}\u{a0}d\u{3000}e\u{2028}f",
    "x   ",
    "   y",
    "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
    "{\"name\": \"Ada\", \"n\": [1, 2.5e-3, -7], \"ok\": true, \"nested\": {\"k\": null}}",
    "12345678901234567890 3.14159 1,000,000 ٣٤٥ ⅷ ½",
    "你好，世界！これは日本語です。한국어 텍스트",
    "emoji 🎉👍🏽👨‍👩‍👧‍👦 and flags 🇫🇷",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>x<|im_end|>",
    "<think>reason</think> <tool_call>{}</tool_call>",
    "<|im_sta rt|> <|im_start <|im_end|",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|start|>assistant<|channel|>final<|message|>ok<|return|>",
    "e\u{301} o\u{308} \u{1100}\u{1161}\u{11a8} Å Å ﬁ",
    "tabs\tand\u{b}vertical\u{c}feeds\u{85}next",
    "CamelCaseWordsAndHTTPServer getHTTPResponseCode",
    "path/to/file.rs:12:5 -- a->b => c != d",
    "$$$ ### !!! ??? ... ,,, ;;; '''' \"\"\"",
    "ünïcödé façade naïve Ελληνικά Русский текст",
    "\u{0}\u{1}\u{1f} control",
];

/// A seeded random text from pieces that stress the pre-tokenizer and BPE.
fn random_text(rng: &mut StdRng) -> String {
    const POOL: &[&str] = &[
        "a",
        "Z",
        "the",
        " the",
        "ing",
        "'s",
        "'T",
        "'ll",
        "'d",
        "'",
        "ſ",
        "0",
        "7",
        "42",
        "3.5",
        " ",
        "  ",
        "\n",
        "\r",
        "\r\n",
        "\t",
        "\u{a0}",
        "\u{3000}",
        "\u{2028}",
        "\u{85}",
        "!",
        "?",
        ".",
        ",",
        "{",
        "}",
        "\"",
        ":",
        "[",
        "]",
        "(",
        ")",
        "<",
        ">",
        "/",
        "\\",
        "-",
        "_",
        "=",
        "é",
        "e\u{301}",
        "ß",
        "Ω",
        "ж",
        "你",
        "好",
        "の",
        "한",
        "\u{1100}\u{1161}",
        "🎉",
        "👍🏽",
        "\u{200d}",
        "٣",
        "½",
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
        "<think>",
        "<|eot_id|>",
        "<|im_",
        "|>",
        "<|",
        "ﬁ",
        "Å",
    ];
    let n = rng.random_range(0..24);
    let mut s = String::new();
    for _ in 0..n {
        if rng.random_ratio(1, 12) {
            // Any scalar value now and then.
            if let Some(c) = char::from_u32(rng.random_range(0..0x3_0000)) {
                s.push(c);
            }
        } else {
            s.push_str(POOL[rng.random_range(0..POOL.len())]);
        }
    }
    s
}

/// Loads `tok` through a fresh cache (twice: built, then read) and checks
/// the tables' tokenizer against the full one; `false` when there are no
/// tables.
fn check_tokenizer(tok: &Path, tag: &str, randoms: usize) -> bool {
    let dir = temp_dir(tag);
    let cache = VocabCache::in_dir(&dir);
    let built = cache.load(tok).unwrap();
    assert_eq!(built.status, CacheStatus::Built);
    let hit = cache.load(tok).unwrap();
    assert_eq!(hit.status, CacheStatus::Hit);
    assert_eq!(
        built.tables, hit.tables,
        "{tag}: the tables read back as written"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let Some(tables) = hit.tables else {
        return false;
    };
    let vocab = Arc::new(hit.vocab);
    let fast = TextTokenizer::from_tables(vocab, tables).expect("tables build a tokenizer");
    assert!(fast.is_cached());
    let full = TextTokenizer::from_file(tok).unwrap();
    let same = |text: &str| {
        let want = full.encode(text).unwrap();
        assert_eq!(fast.encode(text).unwrap(), want, "{tag}: {text:?}");
        assert_eq!(
            fast.encode_standalone(text).unwrap(),
            want,
            "{tag}: {text:?}"
        );
    };
    for t in TEXTS {
        same(t);
    }
    let mut rng = StdRng::seed_from_u64(0x5EED_0FB9);
    for _ in 0..randoms {
        same(&random_text(&mut rng));
    }
    for name in [
        "<|im_end|>",
        "<|endoftext|>",
        "<think>",
        "Ġthe",
        "a",
        "nope-not-a-token",
    ] {
        assert_eq!(
            fast.token_to_id(name),
            full.token_to_id(name),
            "{tag}: {name}"
        );
    }
    for id in [
        0u32, 1, 255, 256, 1000, 100_000, 128_000, 151_643, 151_645, 199_999,
    ] {
        let id = constrain::vocab::TokenId(id);
        assert_eq!(fast.id_to_token(id), full.id_to_token(id), "{tag}: {id}");
    }
    true
}

#[test]
fn qwen_tables_encode_as_the_tokenizers_crate() {
    let Some(tok) = tokenizer_path() else { return };
    assert!(check_tokenizer(&tok, "qwen", 4000), "Qwen gets tables");
}

#[test]
fn other_byte_level_tokenizers_encode_as_the_tokenizers_crate() {
    for name in ["llama3", "gptoss"] {
        if let Some(tok) = other_tokenizer(name) {
            assert!(check_tokenizer(&tok, name, 1500), "{name} gets tables");
        }
    }
}

#[test]
fn shapes_the_tables_do_not_reproduce_get_none() {
    for name in ["llama2", "gemma3", "deepseek_v3"] {
        if let Some(tok) = other_tokenizer(name) {
            assert!(!check_tokenizer(&tok, name, 0), "{name} gets no tables");
        }
    }
}

//! The vocabulary cache (`vocab::VocabCache`): a vocabulary read from the
//! cache is the one read from the JSON (token bytes, stops, added tokens,
//! symbols, tries, masks); a missing, corrupt, truncated or stale file is
//! rebuilt (with a warning for the unusable ones), and an older format's
//! file is left beside a new one, with a note; an unwritable folder means
//! no cache and no error. The cached BPE tables encode as the JSON's
//! tokenizer does (more texts and the real tokenizers: `tests/fast_tokenizer.rs`).

use constrain::vocab::{bytelevel, CacheStatus, TextTokenizer, TokenId, VocabCache, Vocabulary};
use constrain::{Compiler, CompilerConfig, Source};
use constrain_testkit::assets::tokenizer_path;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A fresh empty folder under the system's temp folder.
fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "constrain-vocab-cache-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small byte-level tokenizer.json (every byte, a few merged tokens, two
/// stop tokens and a control marker) with a tokenizer_config.json beside it,
/// in its own folder; returns the tokenizer.json path.
fn small_tokenizer() -> PathBuf {
    let dir = temp_dir("tok");
    let chars = bytelevel::byte_to_char();
    let mut vocab = serde_json::Map::new();
    for (b, c) in chars.iter().enumerate() {
        vocab.insert(c.to_string(), json!(b));
    }
    let word = |s: &[u8]| s.iter().map(|&b| chars[b as usize]).collect::<String>();
    for (i, w) in [
        &b"ab"[..],
        b" the",
        b"{\"",
        b"\"}",
        b"12",
        "é".as_bytes(),
        b"true",
    ]
    .iter()
    .enumerate()
    {
        vocab.insert(word(w), json!(256 + i));
    }
    // Fillers up to the added tokens' ids, which the tokenizers crate
    // numbers after the model's.
    for id in 263..300 {
        vocab.insert(word(format!("zz{id}").as_bytes()), json!(id));
    }
    // Every field the tokenizers crate asks for.
    let added: Vec<serde_json::Value> = [
        (300, "<|endoftext|>", true),
        (301, "<|im_end|>", true),
        (302, "<think>", false),
        (303, "<|stop_here|>", true),
    ]
    .iter()
    .map(|&(id, content, special)| {
        json!({"id": id, "content": content, "special": special, "single_word": false,
               "lstrip": false, "rstrip": false, "normalized": false})
    })
    .collect();
    let t = json!({
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
        "model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"], ["1", "2"], ["{", "\""]]},
    });
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, t.to_string()).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"eos_token": "<|stop_here|>"}"#,
    )
    .unwrap();
    p
}

/// Every public field of two vocabularies agrees.
fn assert_same_vocab(a: &Vocabulary, b: &Vocabulary) {
    assert_eq!(a.num_ids(), b.num_ids());
    assert_eq!(a.logits_width(), b.logits_width());
    assert_eq!(a.num_text_tokens(), b.num_text_tokens());
    assert_eq!(a.max_token_len(), b.max_token_len());
    assert_eq!(a.eos(), b.eos());
    assert_eq!(a.added_tokens(), b.added_tokens());
    assert_eq!(a.adds_prefix_space(), b.adds_prefix_space());
    for i in 0..a.logits_width() as u32 + 3 {
        let t = TokenId(i);
        assert_eq!(a.token_bytes(t), b.token_bytes(t), "token {i}");
        assert_eq!(a.spelling(t), b.spelling(t), "spelling of {i}");
    }
    let sa: Vec<_> = a.symbols().collect();
    let sb: Vec<_> = b.symbols().collect();
    assert_eq!(sa, sb);
}

/// The masks of `sources` over both vocabularies agree along a walk that
/// takes, at each step, the first allowed token that is not a stop (a few
/// dozen steps).
fn assert_same_masks(a: Arc<Vocabulary>, b: Arc<Vocabulary>, sources: &[Source]) {
    let ca = Compiler::new(a, CompilerConfig::default());
    let cb = Compiler::new(b, CompilerConfig::default());
    for src in sources {
        let (x, y) = (ca.compile(src).unwrap(), cb.compile(src).unwrap());
        let (mut mx, mut my) = (x.matcher(), y.matcher());
        for step in 0..40 {
            assert_eq!(mx.allowed(), my.allowed(), "{src:?} step {step}");
            let eos = x.vocab().eos();
            let Some(t) = mx.allowed().iter().find(|t| !eos.contains(t)) else {
                break;
            };
            mx.advance(t).unwrap();
            my.advance(t).unwrap();
        }
    }
}

fn cache_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

fn sources() -> Vec<Source> {
    vec![
        Source::regex("a"),
        Source::regex("(ab|12)+ the[0-9]{2,5}"),
        Source::regex("[^\"]{0,40}\"}"),
        Source::json_schema(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["name", "n"]
        })),
    ]
}

#[test]
fn a_cached_vocabulary_is_the_one_read_from_json() {
    let tok = small_tokenizer();
    let dir = temp_dir("cache");
    let cache = VocabCache::in_dir(&dir);
    let from_json = Vocabulary::from_tokenizer_json_file(&tok).unwrap();
    assert_eq!(
        from_json.eos(),
        &[TokenId(300), TokenId(301), TokenId(303)],
        "the config's stop token joins the default ones"
    );

    let built = cache.load(&tok).unwrap();
    assert_eq!(built.status, CacheStatus::Built);
    assert!(built.warning.is_none());
    assert_eq!(built.path.as_deref(), Some(cache_file(&dir).as_path()));
    let name = cache_file(&dir)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(name.contains(env!("CARGO_PKG_VERSION")), "{name}");
    let hit = cache.load(&tok).unwrap();
    assert_eq!(hit.status, CacheStatus::Hit);
    assert!(hit.warning.is_none());

    assert_same_vocab(&from_json, &built.vocab);
    assert_same_vocab(&from_json, &hit.vocab);
    // Widened as the CLI widens it (the cached tries are kept).
    let wide = |v: Vocabulary| Arc::new(v.with_logits_width(320).unwrap());
    let (j, h) = (wide(from_json), wide(hit.vocab));
    assert_same_vocab(&j, &h);
    assert_same_masks(j, h, &sources());
}

#[test]
fn other_stop_configs_get_their_own_file() {
    let tok = small_tokenizer();
    let dir = temp_dir("stops");
    let cache = VocabCache::in_dir(&dir);
    assert_eq!(cache.load(&tok).unwrap().status, CacheStatus::Built);
    std::fs::remove_file(tok.parent().unwrap().join("tokenizer_config.json")).unwrap();
    let v = cache.load(&tok).unwrap();
    assert_eq!(v.status, CacheStatus::Built, "not the other config's file");
    assert_eq!(v.vocab.eos(), &[TokenId(300), TokenId(301)]);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    assert_eq!(cache.load(&tok).unwrap().status, CacheStatus::Hit);
}

/// Damages the cache file with `damage`, then checks that the next load
/// warns (naming `why`), rebuilds a good vocabulary and rewrites the file.
fn rebuilt_after(damage: impl Fn(&mut Vec<u8>), why: &str) {
    let tok = small_tokenizer();
    let dir = temp_dir("damage");
    let cache = VocabCache::in_dir(&dir);
    let reference = cache.load(&tok).unwrap().vocab;
    let file = cache_file(&dir);
    let good = std::fs::read(&file).unwrap();
    let mut bad = good.clone();
    damage(&mut bad);
    std::fs::write(&file, &bad).unwrap();

    let v = cache.load(&tok).unwrap();
    assert_eq!(v.status, CacheStatus::Rebuilt, "{why}");
    let w = v.warning.expect("a warning");
    assert!(w.contains(why), "{w}");
    assert!(w.contains(&*file.to_string_lossy()), "{w}");
    assert_same_vocab(&reference, &v.vocab);
    assert_eq!(std::fs::read(&file).unwrap(), good, "rewritten");
    assert_eq!(cache.load(&tok).unwrap().status, CacheStatus::Hit);
}

#[test]
fn a_flipped_byte_is_caught_and_rebuilt() {
    // In the payload (the end of the file) and in the header's tokenizer sha.
    rebuilt_after(
        |b| {
            let i = b.len() - 100;
            b[i] ^= 0x04
        },
        "checksum",
    );
    rebuilt_after(|b| b[30] ^= 0x01, "another tokenizer");
}

#[test]
fn a_truncated_file_is_caught_and_rebuilt() {
    rebuilt_after(|b| b.truncate(b.len() - 1), "truncated");
    rebuilt_after(|b| b.truncate(b.len() / 2), "truncated");
    rebuilt_after(|b| b.truncate(5), "truncated");
    rebuilt_after(|b| b.clear(), "truncated");
}

#[test]
fn a_file_of_another_version_or_format_is_stale() {
    let version = env!("CARGO_PKG_VERSION").as_bytes().to_vec();
    let other = version.iter().map(|_| b'9').collect::<Vec<u8>>();
    rebuilt_after(
        move |b| {
            let at = b.windows(version.len()).position(|w| w == version).unwrap();
            b[at..at + version.len()].copy_from_slice(&other);
        },
        "written by constrain 9",
    );
    rebuilt_after(|b| b[8] = b[8].wrapping_add(1), "format");
    rebuilt_after(|b| b[0] = b'x', "not a vocabulary cache");
}

#[test]
fn an_unwritable_folder_means_no_cache_and_no_error() {
    let tok = small_tokenizer();
    let blocker = temp_dir("blocked").join("a-file");
    std::fs::write(&blocker, b"not a folder").unwrap();
    let cache = VocabCache::in_dir(blocker.join("cache"));
    for _ in 0..2 {
        let v = cache.load(&tok).unwrap();
        assert_eq!(v.status, CacheStatus::Unwritable);
        assert!(v.warning.is_none());
        assert_same_vocab(
            &Vocabulary::from_tokenizer_json_file(&tok).unwrap(),
            &v.vocab,
        );
    }
}

#[test]
fn a_disabled_cache_writes_nothing() {
    let tok = small_tokenizer();
    let v = VocabCache::disabled().load(&tok).unwrap();
    assert_eq!(v.status, CacheStatus::Disabled);
    assert!(v.path.is_none());
    assert_same_vocab(
        &Vocabulary::from_tokenizer_json_file(&tok).unwrap(),
        &v.vocab,
    );
    // Only the tokenizer and its config are in its folder.
    assert_eq!(std::fs::read_dir(tok.parent().unwrap()).unwrap().count(), 2);
}

#[test]
fn concurrent_first_loads_agree() {
    let tok = small_tokenizer();
    let dir = temp_dir("race");
    let reference = Vocabulary::from_tokenizer_json_file(&tok).unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| VocabCache::in_dir(&dir).load(&tok).unwrap()))
            .collect();
        for h in hs {
            let v = h.join().unwrap();
            assert!(v.warning.is_none(), "{:?}", v.warning);
            assert_same_vocab(&reference, &v.vocab);
        }
    });
    // One file, no temporary left behind.
    cache_file(&dir);
    assert_eq!(
        VocabCache::in_dir(&dir).load(&tok).unwrap().status,
        CacheStatus::Hit
    );
}

/// The Qwen tokenizer (when `scripts/fetch-assets` has put it in
/// `$CONSTRAIN_HOME`): cached and JSON vocabularies agree on every token and
/// on masks of regexes and a schema, at the models' logits width.
#[test]
fn qwen_from_the_cache_is_the_qwen_from_json() {
    let Some(tok) = tokenizer_path() else { return };
    let dir = temp_dir("qwen");
    let cache = VocabCache::in_dir(&dir);
    assert_eq!(cache.load(&tok).unwrap().status, CacheStatus::Built);
    let hit = cache.load(&tok).unwrap();
    assert_eq!(hit.status, CacheStatus::Hit);
    let width = constrain::vocab::QWEN_LOGITS_WIDTH;
    let j = Arc::new(
        Vocabulary::from_tokenizer_json_file(&tok)
            .unwrap()
            .with_logits_width(width)
            .unwrap(),
    );
    let h = Arc::new(hit.vocab.with_logits_width(width).unwrap());
    assert_same_vocab(&j, &h);
    assert_same_masks(j, h, &sources());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_older_format_file_is_left_beside_a_new_one_with_a_note() {
    let tok = small_tokenizer();
    let dir = temp_dir("format1");
    let cache = VocabCache::in_dir(&dir);
    let first = cache.load(&tok).unwrap();
    let file = cache_file(&dir);
    // The name format 1 gave the same key: no `-f<format>` before `.bin`.
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    let at = name.rfind("-f").unwrap();
    let old = dir.join(format!("{}.bin", &name[..at]));
    std::fs::rename(&file, &old).unwrap();
    let v = cache.load(&tok).unwrap();
    let w = v.warning.expect("a note");
    assert!(
        w.contains("older format") && w.contains(&*old.to_string_lossy()),
        "{w}"
    );
    assert!(old.is_file() && file.is_file(), "both files kept");
    assert_same_vocab(&first.vocab, &v.vocab);
    let hit = cache.load(&tok).unwrap();
    assert_eq!(hit.status, CacheStatus::Hit);
    assert!(hit.warning.is_none());
}

#[cfg(feature = "tokenizers")]
#[test]
fn cached_bpe_tables_encode_as_the_json_tokenizer() {
    let tok = small_tokenizer();
    let dir = temp_dir("tables");
    let cache = VocabCache::in_dir(&dir);
    let built = cache.load(&tok).unwrap();
    let hit = cache.load(&tok).unwrap();
    assert_eq!(hit.status, CacheStatus::Hit);
    assert_eq!(built.tables, hit.tables);
    let tables = hit.tables.expect("a byte-level BPE file has tables");
    let fast = TextTokenizer::from_tables(Arc::new(hit.vocab), tables).unwrap();
    let full = TextTokenizer::from_file(&tok).unwrap();
    for text in [
        "",
        "ab",
        "aab abab 1212 123",
        "{\"k\": true}<|im_end|>x<think>",
        "é  \n\n  x ab'll",
    ] {
        assert_eq!(
            fast.encode(text).unwrap(),
            full.encode(text).unwrap(),
            "{text:?}"
        );
    }
    assert!(
        fast.encode("ab").unwrap().len() == 1,
        "merged by the cached merges"
    );
    // A disabled cache has no tables (the tokenizer then comes from the JSON).
    assert!(VocabCache::disabled().load(&tok).unwrap().tables.is_none());
}

//! # The vocabulary cache
//!
//! Reading a `tokenizer.json` (Qwen's is 11 MB of JSON) and building the
//! token tries the index walks costs hundreds of milliseconds, the same in
//! every process. [`VocabCache`] stores what that produces once per
//! tokenizer, in a binary file that later processes read in one call and
//! decode in a few milliseconds:
//!
//! * the [`Vocabulary`] (every token's bytes, the stop set, the added tokens
//!   and their spellings, the prefix-space flag), and
//! * the tries every index needs (`full`, `short`, `long`, the tokens in
//!   byte order); the tries only some schemas walk (plain levels, string
//!   bodies, byte chains) are still built on first use;
//! * for byte-level BPE tokenizers, the [`BpeTables`] that encode text
//!   without the 11 MB JSON ([`super::TextTokenizer::from_tables`]).
//!
//! The file is `vocab-<sha256 of tokenizer.json>-<digest of the stop
//! configs>-<constrain version>-f<format>.bin` in the cache folder
//! ([`VocabCache::from_env`]: `$CONSTRAIN_HOME/vocab-cache`, default
//! `~/.cache/constrain/vocab-cache`; `CONSTRAIN_NO_CACHE=1` turns it off).
//!
//! ## Trust
//!
//! A file is used only when its header names this format, this version of
//! constrain, the same tokenizer sha256 and stop configs, and its payload
//! has the recorded length and checksum; decoding then checks every length
//! and index it reads. Anything else (a truncated file, a flipped byte, a
//! file another version wrote) is reported as a warning and the file is
//! rebuilt. Files are written to a temporary name and renamed, so a process
//! never reads another's half-written file. A folder that cannot be written
//! means no cache, silently: the vocabulary is built from the JSON as before.

use super::codec::{Dec, Enc};
use super::trie::VocabTries;
use super::{hf, BpeTables, StopConfig, VocabError, Vocabulary};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Magic bytes that open a cache file.
const MAGIC: &[u8; 8] = b"cnstrvoc";
/// Version of the binary layout (bumped when it changes within a release).
/// 2: the BPE tables follow the tries.
const FORMAT: u32 = 2;
/// constrain's version, part of the key: another version rebuilds.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where vocabulary caches live; [`VocabCache::disabled`] keeps none.
#[derive(Clone, Debug)]
pub struct VocabCache {
    dir: Option<PathBuf>,
}

/// What [`VocabCache::load`] did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CacheStatus {
    /// Read from the cache.
    Hit,
    /// Built from the JSON and written to the cache (there was none).
    Built,
    /// The cache file was unusable (see the warning): built and rewritten.
    Rebuilt,
    /// Built from the JSON; the cache is turned off.
    Disabled,
    /// Built from the JSON; the cache folder could not be written.
    Unwritable,
}

/// A vocabulary from [`VocabCache::load`], with what happened.
#[derive(Debug)]
pub struct CachedVocabulary {
    /// The vocabulary.
    pub vocab: Vocabulary,
    /// Where it came from: the cache, or the JSON (and why).
    pub status: CacheStatus,
    /// Why an existing cache file was not used (for stderr).
    pub warning: Option<String>,
    /// The cache file (when the cache is on).
    pub path: Option<PathBuf>,
    /// The tables that encode text with this tokenizer
    /// ([`super::TextTokenizer::from_tables`]): present when the cache is
    /// on and the tokenizer is a byte-level BPE shape they reproduce.
    pub tables: Option<Arc<BpeTables>>,
}

impl VocabCache {
    /// No cache: every load reads the JSON.
    pub fn disabled() -> Self {
        VocabCache { dir: None }
    }

    /// Caches in `dir` (created when first written).
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        VocabCache {
            dir: Some(dir.into()),
        }
    }

    /// The cache the environment asks for: none when `CONSTRAIN_NO_CACHE`
    /// is set (to anything but `0` or empty), else `$CONSTRAIN_HOME/vocab-cache`,
    /// `$CONSTRAIN_HOME` defaulting to `~/.cache/constrain`.
    pub fn from_env() -> Self {
        if std::env::var_os("CONSTRAIN_NO_CACHE").is_some_and(|v| !v.is_empty() && v != "0") {
            return Self::disabled();
        }
        let home = match std::env::var_os("CONSTRAIN_HOME") {
            Some(h) if !h.is_empty() => PathBuf::from(h),
            _ => match std::env::var_os("HOME") {
                Some(h) if !h.is_empty() => PathBuf::from(h).join(".cache/constrain"),
                _ => return Self::disabled(),
            },
        };
        Self::in_dir(home.join("vocab-cache"))
    }

    /// The cache folder, when the cache is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The vocabulary of a `tokenizer.json` file (with the stop tokens of
    /// the configs beside it, as [`Vocabulary::from_tokenizer_json_file`]),
    /// from the cache when it holds a good copy; else built, with its
    /// tries, and written to the cache. The vocabulary is the same either
    /// way; its shared tries are already built.
    pub fn load(&self, tokenizer_json: impl AsRef<Path>) -> Result<CachedVocabulary, VocabError> {
        let path = tokenizer_json.as_ref();
        let raw = std::fs::read(path).map_err(|source| VocabError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let stops = StopConfig::from_dir(match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        })?;
        let Some(dir) = &self.dir else {
            return Ok(CachedVocabulary {
                vocab: build(&raw, &stops, false)?.0,
                status: CacheStatus::Disabled,
                warning: None,
                path: None,
                tables: None,
            });
        };
        let key = Key::new(&raw, &stops);
        let file = dir.join(key.file_name());
        let mut warning = None;
        match std::fs::read(&file) {
            Ok(buf) => match decode(&buf, &key) {
                Ok((vocab, tables)) => {
                    return Ok(CachedVocabulary {
                        vocab,
                        status: CacheStatus::Hit,
                        warning: None,
                        path: Some(file),
                        tables: tables.map(Arc::new),
                    })
                }
                Err(why) => {
                    warning = Some(format!(
                        "vocabulary cache {} is unusable ({why}); rebuilding it",
                        file.display()
                    ))
                }
            },
            // Missing (or its folder is missing or is not a folder). An older format's file, if any, is another name (so
            // an older constrain beside this one keeps its own), noted.
            Err(_) if !file.is_file() => {
                let old = dir.join(key.format1_name());
                if old.is_file() {
                    warning = Some(format!(
                        "vocabulary cache {} is in an older format; building {} beside it",
                        old.display(),
                        file.display()
                    ))
                }
            }
            Err(e) => {
                warning = Some(format!(
                    "cannot read vocabulary cache {} ({e}); rebuilding it",
                    file.display()
                ))
            }
        }
        let (vocab, tables) = build(&raw, &stops, true)?;
        let written = write(dir, &file, &encode(&vocab, tables.as_ref(), &key));
        let status = match (written, &warning) {
            (false, _) => CacheStatus::Unwritable,
            (true, Some(_)) => CacheStatus::Rebuilt,
            (true, None) => CacheStatus::Built,
        };
        Ok(CachedVocabulary {
            vocab,
            status,
            warning,
            path: Some(file),
            tables: tables.map(Arc::new),
        })
    }
}

/// Parses the JSON (and builds the shared tries and the BPE tables when
/// they are to be cached).
fn build(
    raw: &[u8],
    stops: &StopConfig,
    for_cache: bool,
) -> Result<(Vocabulary, Option<BpeTables>), VocabError> {
    let text = std::str::from_utf8(raw)
        .map_err(|e| VocabError::Json(format!("tokenizer.json is not UTF-8: {e}")))?;
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| VocabError::Json(e.to_string()))?;
    let v = hf::parse_value(&json, stops)?;
    if !for_cache {
        return Ok((v, None));
    }
    let t = VocabTries::new(&v, crate::index::IndexConfig::default().horizon);
    let _ = v.tries.set(Arc::new(t));
    let tables = BpeTables::from_json(&json, &v);
    Ok((v, tables))
}

/// What a cache file is for: the tokenizer's sha256 and the stop configs'.
struct Key {
    sha: [u8; 32],
    stops: [u8; 32],
}

impl Key {
    fn new(raw: &[u8], stops: &StopConfig) -> Key {
        let sha: [u8; 32] = Sha256::digest(raw).into();
        let mut h = Sha256::new();
        for n in &stops.names {
            h.update((n.len() as u64).to_le_bytes());
            h.update(n.as_bytes());
        }
        h.update(u64::MAX.to_le_bytes());
        for &i in &stops.ids {
            h.update(i.to_le_bytes());
        }
        Key {
            sha,
            stops: h.finalize().into(),
        }
    }

    fn file_name(&self) -> String {
        format!(
            "vocab-{}-{}-{VERSION}-f{FORMAT}.bin",
            hex(&self.sha),
            hex(&self.stops[..4])
        )
    }

    /// The name format 1 used (no format in it): an older constrain's file,
    /// left for it to use.
    fn format1_name(&self) -> String {
        format!(
            "vocab-{}-{}-{VERSION}.bin",
            hex(&self.sha),
            hex(&self.stops[..4])
        )
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes `data` to `file` through a temporary file in `dir` and a rename.
/// `false` when anything fails (the cache is then simply not written).
fn write(dir: &Path, file: &Path, data: &[u8]) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    // A name no other process or thread writes to.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(
        ".{}.tmp{}-{}-{nanos}",
        file.file_name().and_then(|n| n.to_str()).unwrap_or("vocab"),
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    ));
    if std::fs::write(&tmp, data).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    if std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    true
}

/// The cache file's bytes: header, then the payload.
fn encode(v: &Vocabulary, tables: Option<&BpeTables>, key: &Key) -> Vec<u8> {
    let mut p = Enc::default();
    v.encode_cache(&mut p);
    match v.tries.get() {
        Some(t) => {
            p.u8(1);
            t.encode(&mut p);
        }
        None => p.u8(0),
    }
    match tables {
        Some(t) => {
            p.u8(1);
            t.encode_cache(&mut p);
        }
        None => p.u8(0),
    }
    let payload = p.buf;
    let mut out = Vec::with_capacity(payload.len() + 128);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(VERSION.len() as u32).to_le_bytes());
    out.extend_from_slice(VERSION.as_bytes());
    out.extend_from_slice(&key.sha);
    out.extend_from_slice(&key.stops);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Checks a cache file's header and payload and decodes it; the error says
/// what was wrong.
fn decode(buf: &[u8], key: &Key) -> Result<(Vocabulary, Option<BpeTables>), String> {
    let mut d = Dec::new(buf);
    if d.take(8)? != MAGIC {
        return Err("not a vocabulary cache file".into());
    }
    let format = d.u32()?;
    if format != FORMAT {
        return Err(format!("format {format}, expected {FORMAT}"));
    }
    let n = d.u32()? as usize;
    let version = d.take(n)?;
    if version != VERSION.as_bytes() {
        return Err(format!(
            "written by constrain {}, this is {VERSION}",
            String::from_utf8_lossy(version)
        ));
    }
    if d.take(32)? != key.sha {
        return Err("written for another tokenizer (sha256 differs)".into());
    }
    if d.take(32)? != key.stops {
        return Err("written for other stop-token configs".into());
    }
    let len = d.u64()?;
    let sum = d.u64()?;
    let payload = d.rest();
    if payload.len() as u64 != len {
        return Err(format!(
            "truncated or padded: payload of {} bytes, header says {len}",
            payload.len()
        ));
    }
    if checksum(payload) != sum {
        return Err("checksum mismatch".into());
    }
    let mut p = Dec::new(payload);
    let v = Vocabulary::decode_cache(&mut p)?;
    if p.u8()? == 1 {
        let t = VocabTries::decode(&mut p, &v)?;
        let _ = v.tries.set(Arc::new(t));
    }
    let tables = match p.u8()? {
        1 => Some(BpeTables::decode_cache(&mut p, &v)?),
        _ => None,
    };
    if !p.rest().is_empty() {
        return Err("trailing bytes after the payload".into());
    }
    Ok((v, tables))
}

/// A 64-bit checksum of the payload (four independent multiply-rotate
/// lanes over 8-byte words: any change within one 32-byte block changes
/// the result, others with probability about 2^-64). Not a defence against
/// a crafted file, which the cache folder's owner could write anyway.
fn checksum(data: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = [K, K ^ 0x1234_5678, K.rotate_left(17), K.rotate_left(41)];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (l, lane) in h.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * l..8 * l + 8]);
            *lane = (*lane ^ u64::from_le_bytes(w))
                .wrapping_mul(K)
                .rotate_left(29);
        }
    }
    for (i, &x) in blocks.remainder().iter().enumerate() {
        h[i % 4] = (h[i % 4] ^ x as u64).wrapping_mul(K).rotate_left(29);
    }
    let mut out = data.len() as u64;
    for lane in h {
        out = (out ^ lane).wrapping_mul(K).rotate_left(31);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_sees_every_byte_and_the_length() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let c = checksum(&data);
        for i in [0, 1, 31, 32, 500, 990, 999] {
            let mut d = data.clone();
            d[i] ^= 0x10;
            assert_ne!(checksum(&d), c, "byte {i}");
        }
        assert_ne!(checksum(&data[..999]), c);
        let mut longer = data.clone();
        longer.push(0);
        assert_ne!(checksum(&longer), c);
    }

    #[test]
    fn reader_refuses_to_read_past_the_end() {
        let mut e = Enc::default();
        e.u32s([1u32, 2, 3].into_iter());
        let full = e.buf.clone();
        assert_eq!(Dec::new(&full).u32s().unwrap(), vec![1, 2, 3]);
        for cut in 0..full.len() {
            assert!(Dec::new(&full[..cut]).u32s().is_err(), "cut at {cut}");
        }
        // A length that overflows when multiplied is an error too.
        let mut huge = Enc::default();
        huge.u64(u64::MAX / 2);
        assert!(Dec::new(&huge.buf).u32s().is_err());
    }
}

//! # Reading Hugging Face `tokenizer.json` files: byte-level BPE and SentencePiece
//!
//! Two families of tokenizers store their vocabulary in `tokenizer.json` with
//! `model.type = "BPE"`, and they write a token's bytes differently:
//!
//! * **Byte-level BPE** (Qwen, GPT-2, Llama 3, DeepSeek V3, gpt-oss): every
//!   byte is one printable char of the GPT-2 table ([`super::bytelevel`]); the
//!   decoder is `ByteLevel`. A token's bytes are the inverse of that table.
//! * **SentencePiece with byte fallback** (Llama 2, Gemma 3, Mistral v1): the
//!   token is its text, with `▁` (U+2581) standing for a space; bytes the
//!   pieces do not cover are the 256 tokens `<0x00>` … `<0xFF>`. The decoder is
//!   `Metaspace`, or a `Sequence` of `Replace("▁", " ")`, `ByteFallback`,
//!   `Fuse` and maybe `Strip`. A token's bytes are its UTF-8 with `▁` → space,
//!   and `<0xNN>` is the single byte `NN`.
//!
//! Which family a file is comes from its **decoder** (the thing that turns ids
//! back into text, which is what a mask is about). A file whose decoder is
//! neither (WordPiece, a `Unigram` model, a decoder we do not know) is refused
//! with [`VocabError::Unsupported`] naming the field, never read as something
//! it is not: a wrong byte mapping would be a wrong mask.
//!
//! ## The leading space of SentencePiece
//!
//! Llama 2's normalizer prepends `▁` to every text it encodes (`Prepend("▁")`;
//! newer files say `Metaspace { prepend_scheme: "first" }`), and its decoder
//! strips one leading space when it decodes from the first id
//! (`Strip(" ", 1, 0)`). A text encoded on its own therefore starts with a
//! token like `▁{` whose bytes are ` {`.
//!
//! constrain's masks are about the bytes the model *outputs*, and an output
//! continues a prompt: nothing is prepended to it, and nothing is stripped
//! from it. So token bytes are exact (`▁{` is ` {`), the index allows `▁{`
//! only where a space is allowed, and a schema's first byte is reached with
//! the token `{`. This is what llguidance's `toktrie` and XGrammar's
//! `TokenizerInfo` do too (they decode `▁` as a space with no first-token
//! rule; XGrammar keeps `prepend_space_in_tokenization` only as information).
//! [`Vocabulary::adds_prefix_space`] says whether the tokenizer prepends the
//! space when it encodes a text alone, and
//! [`super::TextTokenizer::encode`] tokenizes text as output (no prefix);
//! [`super::TextTokenizer::encode_standalone`] keeps the prefix (for prompts).
//!
//! ## Added tokens
//!
//! Special added tokens never enter the index (EOS is allowed where the text
//! is complete; BOS, `<unk>`, `<pad>`, turn markers never). Non-special added
//! tokens of byte-level files stay out too (Qwen's `<think>`, DeepSeek's
//! `<｜tool▁calls▁begin｜>`: control markers). In SentencePiece files, a
//! non-special added token made only of whitespace (Gemma 3's runs of `\n` and
//! of `▁`, ids 107–167) is ordinary text and enters the index with its bytes;
//! the other non-special added tokens (Gemma's `<unusedN>`, `<mask>`, HTML
//! tags such as `<table>`) stay out: the same text is reachable through
//! ordinary pieces, so only the single marker token is lost.
//!
//! ## Stop tokens
//!
//! The stop (EOS) set is the union of the special added tokens named in
//! [`super::DEFAULT_EOS_NAMES`] (non-special ones only when no special one
//! matches: Gemma's non-special `</s>` is an HTML tag), the `eos_token` of a `tokenizer_config.json`
//! and the `eos_token_id` (one id or a list) of a `generation_config.json`,
//! when those files sit beside the `tokenizer.json`
//! ([`Vocabulary::from_tokenizer_json_file`] looks for them). A stop token a
//! config names but the tokenizer lacks is an error
//! ([`VocabError::UnknownStop`]). An empty set is [`VocabError::NoEos`].

use super::{bytelevel, TokenId, VocabError, Vocabulary, DEFAULT_EOS_NAMES};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

/// How a `tokenizer.json` writes a token's bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TokenEncoding {
    /// GPT-2 byte↔char table (`ByteLevel` decoder).
    ByteLevel,
    /// SentencePiece text with `▁` for space; `byte_fallback`: `<0xNN>`
    /// tokens are single bytes.
    SentencePiece {
        /// Whether `<0xNN>` tokens stand for single bytes.
        byte_fallback: bool,
    },
}

/// Stop tokens declared by the files beside a `tokenizer.json`.
#[derive(Clone, Debug, Default)]
pub struct StopConfig {
    /// Token texts (`tokenizer_config.json` `eos_token`).
    pub names: Vec<String>,
    /// Token ids (`generation_config.json` `eos_token_id`).
    pub ids: Vec<u32>,
    /// Where they came from, for error messages.
    pub source: String,
}

impl StopConfig {
    /// Reads `tokenizer_config.json` and `generation_config.json` from `dir`
    /// when present. A present file that is not valid JSON is an error.
    pub fn from_dir(dir: &Path) -> Result<Self, VocabError> {
        let mut out = StopConfig::default();
        let mut sources = Vec::new();
        let tc = dir.join("tokenizer_config.json");
        if let Some(text) = read_optional(&tc)? {
            out.add_tokenizer_config(&text)
                .map_err(|e| VocabError::Json(format!("{}: {e}", tc.display())))?;
            sources.push(tc.display().to_string());
        }
        let gc = dir.join("generation_config.json");
        if let Some(text) = read_optional(&gc)? {
            out.add_generation_config(&text)
                .map_err(|e| VocabError::Json(format!("{}: {e}", gc.display())))?;
            sources.push(gc.display().to_string());
        }
        out.source = sources.join(", ");
        Ok(out)
    }

    /// Adds the `eos_token` of a `tokenizer_config.json` text (a string or an
    /// `AddedToken` object with `content`).
    pub fn add_tokenizer_config(&mut self, json: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        match v.get("eos_token") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => self.names.push(s.clone()),
            Some(Value::Object(o)) => match o.get("content") {
                Some(Value::String(s)) => self.names.push(s.clone()),
                _ => return Err("eos_token: object without a string \"content\"".into()),
            },
            Some(_) => return Err("eos_token: expected a string or an object".into()),
        }
        Ok(())
    }

    /// Adds the `eos_token_id` of a `generation_config.json` text (an integer
    /// or a list of integers).
    pub fn add_generation_config(&mut self, json: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let bad = || "eos_token_id: expected an integer or a list of integers".to_string();
        match v.get("eos_token_id") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) => self.ids.push(n.as_u64().ok_or_else(bad)? as u32),
            Some(Value::Array(a)) => {
                for x in a {
                    self.ids.push(x.as_u64().ok_or_else(bad)? as u32);
                }
            }
            Some(_) => return Err(bad()),
        }
        Ok(())
    }
}

fn read_optional(p: &Path) -> Result<Option<String>, VocabError> {
    match std::fs::read_to_string(p) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(VocabError::Io {
            path: p.display().to_string(),
            source,
        }),
    }
}

fn kind(v: &Value) -> Option<&str> {
    v.get("type").and_then(Value::as_str)
}

/// The members of a `Sequence` node (`decoders`, `normalizers`,
/// `pretokenizers`), or the node itself.
fn members<'a>(v: &'a Value, key: &str) -> Vec<&'a Value> {
    match (kind(v), v.get(key).and_then(Value::as_array)) {
        (Some("Sequence"), Some(a)) => a.iter().collect(),
        _ if v.is_null() => Vec::new(),
        _ => vec![v],
    }
}

/// Which family a tokenizer.json belongs to, from its decoder.
pub fn token_encoding(t: &Value) -> Result<TokenEncoding, VocabError> {
    let model_fallback = t
        .pointer("/model/byte_fallback")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let decoder = t.get("decoder").unwrap_or(&Value::Null);
    if decoder.is_null() {
        // Files without a decoder were read as byte-level before; keep that.
        return Ok(TokenEncoding::ByteLevel);
    }
    let ds = members(decoder, "decoders");
    let kinds: Vec<&str> = ds.iter().filter_map(|d| kind(d)).collect();
    if kinds.contains(&"ByteLevel") {
        return Ok(TokenEncoding::ByteLevel);
    }
    let metaspace = ds.iter().any(|d| match kind(d) {
        Some("Metaspace") => d.get("replacement").and_then(Value::as_str).unwrap_or("▁") == "▁",
        Some("Replace") => {
            d.pointer("/pattern/String").and_then(Value::as_str) == Some("▁")
                && d.get("content").and_then(Value::as_str) == Some(" ")
        }
        _ => false,
    });
    if metaspace {
        return Ok(TokenEncoding::SentencePiece {
            byte_fallback: model_fallback || kinds.contains(&"ByteFallback"),
        });
    }
    Err(VocabError::Unsupported(format!(
        "decoder {} (types {kinds:?}); supported: \"ByteLevel\" (byte-level BPE) and \
         SentencePiece (\"Metaspace\", or Replace(\"▁\", \" \") with \"ByteFallback\")",
        kind(decoder).unwrap_or("?")
    )))
}

/// Whether encoding a text on its own prepends a space (`Prepend("▁")`
/// normalizer, `Metaspace` pre-tokenizer with a prepend scheme, `ByteLevel`
/// pre-tokenizer with `add_prefix_space`).
pub fn adds_prefix_space(t: &Value) -> bool {
    let norm = t.get("normalizer").unwrap_or(&Value::Null);
    let prepend = members(norm, "normalizers").iter().any(|n| {
        kind(n) == Some("Prepend") && n.get("prepend").and_then(Value::as_str) == Some("▁")
    });
    let pre = t.get("pre_tokenizer").unwrap_or(&Value::Null);
    let pre_adds = members(pre, "pretokenizers").iter().any(|p| match kind(p) {
        Some("Metaspace") => match p.get("prepend_scheme").and_then(Value::as_str) {
            Some(s) => s != "never",
            None => p
                .get("add_prefix_space")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        },
        Some("ByteLevel") => p
            .get("add_prefix_space")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        _ => false,
    });
    prepend || pre_adds
}

/// The same tokenizer.json with its prefix-space rules turned off, so that a
/// text is tokenized as the model would output it after a prompt.
pub fn without_prefix_space(t: &mut Value) {
    if let Some(norm) = t.get_mut("normalizer") {
        let is_prepend = |n: &Value| {
            kind(n) == Some("Prepend") && n.get("prepend").and_then(Value::as_str) == Some("▁")
        };
        if is_prepend(norm) {
            *norm = Value::Null;
        } else if let Some(a) = norm.get_mut("normalizers").and_then(Value::as_array_mut) {
            a.retain(|n| !is_prepend(n));
        }
    }
    if let Some(pre) = t.get_mut("pre_tokenizer") {
        let fix = |p: &mut Value| match kind(p) {
            Some("Metaspace") => {
                if let Some(o) = p.as_object_mut() {
                    o.insert("prepend_scheme".into(), Value::String("never".into()));
                    o.insert("add_prefix_space".into(), Value::Bool(false));
                }
            }
            Some("ByteLevel") => {
                if let Some(o) = p.as_object_mut() {
                    o.insert("add_prefix_space".into(), Value::Bool(false));
                }
            }
            _ => {}
        };
        if let Some(a) = pre.get_mut("pretokenizers").and_then(Value::as_array_mut) {
            a.iter_mut().for_each(fix);
        } else {
            fix(pre);
        }
    }
}

/// `<0xNN>` → `NN`.
fn byte_fallback_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The bytes of a SentencePiece token: `▁` → space, `<0xNN>` → the byte.
pub fn sentencepiece_bytes(s: &str, byte_fallback: bool) -> Vec<u8> {
    if byte_fallback {
        if let Some(b) = byte_fallback_token(s) {
            return vec![b];
        }
    }
    s.replace('\u{2581}', " ").into_bytes()
}

/// Parses a whole tokenizer.json (with stop tokens from `stops`).
pub fn parse(json: &str, stops: &StopConfig) -> Result<Vocabulary, VocabError> {
    let t: Value = serde_json::from_str(json).map_err(|e| VocabError::Json(e.to_string()))?;
    parse_value(&t, stops)
}

/// [`parse`] of an already parsed tokenizer.json.
pub fn parse_value(t: &Value, stops: &StopConfig) -> Result<Vocabulary, VocabError> {
    let model = t
        .get("model")
        .ok_or_else(|| VocabError::Json("missing field `model`".into()))?;
    if let Some(k) = kind(model) {
        if k != "BPE" {
            return Err(VocabError::Unsupported(format!(
                "model.type {k:?}; only \"BPE\" models (byte-level BPE, or SentencePiece BPE \
                 with byte fallback) are supported"
            )));
        }
    }
    let vocab: HashMap<String, u32> = serde_json::from_value(
        model
            .get("vocab")
            .cloned()
            .ok_or_else(|| VocabError::Json("missing field `model.vocab`".into()))?,
    )
    .map_err(|e| VocabError::Json(format!("model.vocab: {e}")))?;
    #[derive(serde::Deserialize)]
    struct Added {
        id: u32,
        content: String,
        #[serde(default)]
        special: bool,
    }
    let added: Vec<Added> = match t.get("added_tokens") {
        None | Some(Value::Null) => Vec::new(),
        Some(a) => serde_json::from_value(a.clone())
            .map_err(|e| VocabError::Json(format!("added_tokens: {e}")))?,
    };
    let enc = token_encoding(t)?;
    let prefix = adds_prefix_space(t);

    let mut regular: Vec<(u32, String)> = vocab.into_iter().map(|(s, id)| (id, s)).collect();
    regular.sort_unstable_by_key(|r| r.0);
    let added_ids: HashSet<u32> = added.iter().map(|a| a.id).collect();

    let mut v = Vocabulary::empty();
    v.prefix_space = prefix;
    let table = bytelevel::char_to_byte_table();
    let mut buf = Vec::with_capacity(64);
    for (id, s) in &regular {
        if added_ids.contains(id) {
            continue;
        }
        match enc {
            TokenEncoding::ByteLevel => {
                buf.clear();
                for ch in s.chars() {
                    match table.get(&ch) {
                        Some(&b) => buf.push(b),
                        None => {
                            return Err(VocabError::NotByteLevel {
                                id: *id,
                                token: s.clone(),
                                ch,
                            })
                        }
                    }
                }
                v.push(TokenId(*id), Some(&buf))?;
            }
            TokenEncoding::SentencePiece { byte_fallback } => {
                v.push(TokenId(*id), Some(&sentencepiece_bytes(s, byte_fallback)))?;
            }
        }
    }
    for a in &added {
        let text_token = !a.special
            && matches!(enc, TokenEncoding::SentencePiece { .. })
            && !a.content.is_empty()
            && a.content
                .chars()
                .all(|c| c == '\u{2581}' || c.is_whitespace());
        if text_token {
            v.push(TokenId(a.id), Some(&sentencepiece_bytes(&a.content, false)))?;
        } else {
            v.push(TokenId(a.id), None)?;
            v.added.push((TokenId(a.id), a.content.clone(), a.special));
        }
    }

    // Stop set: default names among the added tokens, plus the configs'.
    // Special tokens first: Gemma's non-special `</s>` is the HTML
    // strikethrough tag, not an end of sequence.
    let named = |special_only: bool| -> BTreeSet<TokenId> {
        added
            .iter()
            .filter(|a| {
                (a.special || !special_only) && DEFAULT_EOS_NAMES.contains(&a.content.as_str())
            })
            .map(|a| TokenId(a.id))
            .collect()
    };
    let mut eos = named(true);
    if eos.is_empty() {
        eos = named(false);
    }
    let by_name: HashMap<&str, u32> = added
        .iter()
        .map(|a| (a.content.as_str(), a.id))
        .chain(regular.iter().map(|(id, s)| (s.as_str(), *id)))
        .collect();
    for name in &stops.names {
        match by_name.get(name.as_str()) {
            Some(&id) => {
                eos.insert(TokenId(id));
            }
            None => {
                return Err(VocabError::UnknownStop {
                    token: name.clone(),
                    source_file: stops.source.clone(),
                })
            }
        }
    }
    for &id in &stops.ids {
        if id as usize >= v.spans.len() {
            return Err(VocabError::UnknownStop {
                token: format!("id {id}"),
                source_file: stops.source.clone(),
            });
        }
        eos.insert(TokenId(id));
    }
    if eos.is_empty() {
        return Err(VocabError::NoEos(DEFAULT_EOS_NAMES.join(", ")));
    }
    let n = v.spans.len();
    let v = v.with_eos(eos.into_iter().collect())?;
    let mut v = v;
    v.set_logits_width(n)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tiny SentencePiece tokenizer.json in Llama 2's shape.
    fn spm(extra_added: Value) -> String {
        let mut added = vec![
            json!({"id": 0, "content": "<unk>", "special": true}),
            json!({"id": 1, "content": "<s>", "special": true}),
            json!({"id": 2, "content": "</s>", "special": true}),
        ];
        if let Value::Array(a) = extra_added {
            added.extend(a);
        }
        json!({
            "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
            "pre_tokenizer": null,
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "byte_fallback": true, "vocab": {
                "<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xE4>": 4, "▁{": 5, "a▁b": 6,
                "▁▁": 7, "<0x0a>": 8, "<0x0A0>": 9}, "merges": []}
        })
        .to_string()
    }

    #[test]
    fn sentencepiece_pieces_byte_fallback_and_specials() {
        let v = parse(&spm(json!([])), &StopConfig::default()).unwrap();
        let b = |i: u32| v.token_bytes(TokenId(i)).map(|b| b.to_vec());
        assert_eq!(b(3), Some(b"\n".to_vec()));
        assert_eq!(b(4), Some(vec![0xE4]));
        assert_eq!(b(5), Some(b" {".to_vec()));
        assert_eq!(b(6), Some(b"a b".to_vec()));
        // Lower-case hex is a byte too; three hex digits is ordinary text.
        assert_eq!(b(8), Some(b"\n".to_vec()));
        assert_eq!(b(9), Some(b"<0x0A0>".to_vec()));
        assert_eq!(b(0), None);
        assert_eq!(b(1), None);
        assert_eq!(b(2), None);
        assert_eq!(v.eos(), &[TokenId(2)]);
        assert!(v.adds_prefix_space());
    }

    #[test]
    fn whitespace_added_tokens_are_text_in_sentencepiece_files() {
        let extra = json!([
            {"id": 7, "content": "▁▁", "special": false},
            {"id": 10, "content": "\n\n", "special": false},
            {"id": 11, "content": "<unused0>", "special": false},
        ]);
        let v = parse(&spm(extra), &StopConfig::default()).unwrap();
        assert_eq!(v.token_bytes(TokenId(7)), Some(&b"  "[..]));
        assert_eq!(v.token_bytes(TokenId(10)), Some(&b"\n\n"[..]));
        assert_eq!(v.token_bytes(TokenId(11)), None);
        // A non-special `</s>`-named added token is not a stop when a special one is.
        let mut t: Value = serde_json::from_str(&spm(json!([]))).unwrap();
        t["added_tokens"][2]["content"] = json!("<eos>");
        t["added_tokens"]
            .as_array_mut()
            .unwrap()
            .push(json!({"id": 12, "content": "</s>", "special": false}));
        let v = parse(&t.to_string(), &StopConfig::default()).unwrap();
        assert_eq!(v.eos(), &[TokenId(2)]);
    }

    #[test]
    fn stops_come_from_the_configs() {
        let mut stops = StopConfig::default();
        stops
            .add_tokenizer_config(r#"{"eos_token": {"__type": "AddedToken", "content": "<s>"}}"#)
            .unwrap();
        stops
            .add_generation_config(r#"{"eos_token_id": [0, 2]}"#)
            .unwrap();
        let v = parse(&spm(json!([])), &stops).unwrap();
        assert_eq!(v.eos(), &[TokenId(0), TokenId(1), TokenId(2)]);

        let mut bad = StopConfig {
            source: "tokenizer_config.json".into(),
            ..Default::default()
        };
        bad.add_tokenizer_config(r#"{"eos_token": "<|nope|>"}"#)
            .unwrap();
        let e = parse(&spm(json!([])), &bad).unwrap_err();
        assert!(matches!(e, VocabError::UnknownStop { .. }), "{e}");
        assert!(e.to_string().contains("<|nope|>"));
        let mut far = StopConfig::default();
        far.add_generation_config(r#"{"eos_token_id": 99}"#)
            .unwrap();
        assert!(matches!(
            parse(&spm(json!([])), &far),
            Err(VocabError::UnknownStop { .. })
        ));
        assert!(StopConfig::default()
            .add_generation_config(r#"{"eos_token_id": "x"}"#)
            .is_err());
    }

    #[test]
    fn unknown_decoders_and_models_are_refused() {
        let mut t: Value = serde_json::from_str(&spm(json!([]))).unwrap();
        t["decoder"] = json!({"type": "WordPiece", "prefix": "##"});
        let e = parse(&t.to_string(), &StopConfig::default()).unwrap_err();
        assert!(matches!(e, VocabError::Unsupported(_)), "{e}");
        assert!(e.to_string().contains("WordPiece"));
        t["decoder"] = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"});
        t["model"]["type"] = json!("Unigram");
        let e = parse(&t.to_string(), &StopConfig::default()).unwrap_err();
        assert!(e.to_string().contains("Unigram"), "{e}");
    }

    #[test]
    fn prefix_rules_are_turned_off_for_output() {
        let mut t: Value = serde_json::from_str(&spm(json!([]))).unwrap();
        assert!(adds_prefix_space(&t));
        without_prefix_space(&mut t);
        assert!(!adds_prefix_space(&t));
        let mut m = json!({"pre_tokenizer": {"type": "Metaspace", "replacement": "▁",
            "prepend_scheme": "first", "split": false}});
        assert!(adds_prefix_space(&m));
        without_prefix_space(&mut m);
        assert!(!adds_prefix_space(&m));
    }
}

//! Shared by the structural-tag test files: small vocabularies, compiling a
//! format, walking text through a matcher, refusals, example tools.
#![allow(dead_code)]

use constrain::tags::{StructuralTag, TagError};
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source, TokenId, Vocabulary};
use constrain_testkit::budget::bytes_and;
use serde_json::{json, Value};
use std::sync::Arc;

pub fn vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "<f=", "</f>", "{\"", "\":", "<think>", "</think>", "hi", " the",
    ])
}

pub fn compile(v: &Arc<Vocabulary>, fmt: Value) -> Result<Arc<Compiled>, CompileError> {
    let c = Compiler::new(v.clone(), CompilerConfig::default());
    c.compile(&Source::structural_tag(
        &json!({"type": "structural_tag", "format": fmt}),
    )?)
}

/// Walks `text` byte by byte; whether it ends accepted.
pub fn accepts(c: &Compiled, text: &str) -> bool {
    let mut m = c.matcher();
    text.bytes().all(|b| m.accept_token(TokenId(b as u32))) && m.is_accepting()
}

pub fn refusal(tag: Value) -> TagError {
    refusal_in(vocab().0, tag)
}

pub fn refusal_in(v: Arc<Vocabulary>, tag: Value) -> TagError {
    match StructuralTag::from_json(&tag) {
        Err(e) => e,
        Ok(t) => {
            let c = Compiler::new(v, CompilerConfig::default());
            match c.compile(&Source::StructuralTag {
                tag: t,
                options: StructuralTag::schema_options(),
            }) {
                Err(CompileError::Tag(e)) => e,
                Err(e) => panic!("{tag}: refused, but not as a tag error: {e}"),
                Ok(_) => panic!("{tag}: compiled"),
            }
        }
    }
}

pub fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
            "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
    ])
}

/// A byte-level vocabulary with special tokens: the 256 single bytes (ids
/// 0..=255), then `<|endoftext|>` (EOS), `<tool_call>`, `</tool_call>`,
/// `<think>` and `</think>` as added tokens.
pub fn vocab_with_specials() -> (Arc<Vocabulary>, [TokenId; 5]) {
    let table = constrain::vocab::bytelevel::byte_to_char();
    let regular: Vec<(u32, String)> = (0..=255u8)
        .map(|b| (b as u32, table[b as usize].to_string()))
        .collect();
    let names = [
        "<|endoftext|>",
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
    ];
    let added: Vec<(u32, String, bool)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (256 + i as u32, n.to_string(), i == 0))
        .collect();
    let v = Vocabulary::from_byte_level(regular, added, None).unwrap();
    (Arc::new(v), [0, 1, 2, 3, 4].map(|i| TokenId(256 + i)))
}

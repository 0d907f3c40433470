//! `lark_parse`: arbitrary text as a Lark grammar. Invariants: parsing
//! (lexing, lowering, the greedy-lexer check, writing GBNF rules) never
//! panics and ends; every refusal but a missing `start` names a line and a
//! column; a grammar that parses lowers through the GBNF machinery without
//! a panic.
#![no_main]

use constrain::grammar::lark::{Lark, LarkError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() > 4096 {
        return;
    }
    match Lark::parse("fuzz", text) {
        Ok(g) => {
            let _ = constrain::grammar::gbnf::lower::fragments(&g.gbnf, &Default::default());
        }
        Err(LarkError::NoStart) => {}
        Err(e) => assert!(e.to_string().starts_with("line "), "{e}"),
    }
});

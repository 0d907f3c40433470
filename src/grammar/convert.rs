//! # Converting between GBNF and Lark, where it is exact
//!
//! * **Lark → GBNF** ([`lark_to_gbnf`]): the GBNF rules constrain compiles
//!   a Lark grammar into (its lexer, `%ignore` and `%json` blocks written
//!   out), printed as GBNF text. The language is the one constrain
//!   compiles for the Lark grammar, so the conversion is exact wherever the
//!   grammar compiles; a grammar with special tokens is refused (a token is
//!   no text GBNF can hold).
//! * **GBNF → Lark** ([`gbnf_to_lark`]): one Lark rule per GBNF rule
//!   (`root` becomes `start`), literals as strings and classes as
//!   one-character regexes. GBNF reads characters, Lark lexemes, so the
//!   result is checked by the same greedy-lexer proof every Lark grammar
//!   passes; when a string could run into its neighbour, the grammar is
//!   written again with one character per lexeme, which no lexeme can run
//!   into. Either way the Lark grammar's language is the GBNF one.
//!
//! Names are kept where the other format allows them (`-` and `.` become
//! `_` in Lark, `_` becomes `-` in GBNF), with a numeric suffix where two
//! would collide.

use super::gbnf::ast::{Expr, Rule};
use super::gbnf::Gbnf;
use super::lark::{Lark, LarkError};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// Why a grammar cannot be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The Lark grammar does not compile (or the GBNF grammar written as
    /// Lark does not: the message says where).
    #[error("{0}")]
    Lark(#[from] LarkError),
    /// A construct the target format cannot say.
    #[error("rule `{rule}`: {what} cannot be written in {format}")]
    NotExpressible {
        /// The rule (as named in the source grammar, or constrain's name for
        /// a lowered Lark rule).
        rule: String,
        /// The construct.
        what: String,
        /// `GBNF` or `Lark`.
        format: &'static str,
    },
}

/// Names of `rules` renamed by `fix` to fit the target format, each unique.
fn rename(rules: &[Rule], fix: impl Fn(&str) -> String) -> HashMap<String, String> {
    let mut taken = HashSet::new();
    let mut out = HashMap::new();
    for r in rules {
        let base = fix(&r.name);
        let mut name = base.clone();
        let mut n = 2;
        while !taken.insert(name.clone()) {
            name = format!("{base}_{n}");
            n += 1;
        }
        out.insert(r.name.clone(), name);
    }
    out
}

/// The GBNF text of the rules constrain compiles `lark` into.
pub fn lark_to_gbnf(lark: &Lark) -> Result<String, ConvertError> {
    let rules = &lark.gbnf.rules;
    let names = rename(rules, |n| {
        if n == "root" {
            return "root".into();
        }
        let s: String = n
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        s.replace("_", "-")
    });
    let mut out = String::new();
    for r in rules {
        let mut body = String::new();
        expr(&r.body, &names, &r.name, &mut body, 0, &GbnfLeaves)?;
        let _ = writeln!(out, "{} ::= {body}", names[&r.name]);
    }
    Ok(out)
}

fn gbnf_char(c: char, out: &mut String, in_class: bool) {
    match c {
        '"' if !in_class => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        ']' | '-' | '[' if in_class => {
            out.push('\\');
            out.push(c);
        }
        '^' if in_class => out.push_str("\\x5E"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7F => {
            let _ = write!(out, "\\x{:02X}", c as u32);
        }
        c => out.push(c),
    }
}

/// What the two printers do differently: the leaves (literals, classes,
/// `.`, raw bytes). Alternatives, sequences, references and repetitions
/// are written alike by [`expr`].
trait Leaves {
    /// Writes the leaf `e` of rule `rule` at precedence `prec` (3: the
    /// operand of a repetition).
    fn leaf(&self, e: &Expr, rule: &str, out: &mut String, prec: u8) -> Result<(), ConvertError>;
}

/// GBNF's leaves.
struct GbnfLeaves;

impl Leaves for GbnfLeaves {
    fn leaf(&self, e: &Expr, rule: &str, out: &mut String, _: u8) -> Result<(), ConvertError> {
        match e {
            Expr::Literal(cs) => {
                out.push('"');
                cs.iter().for_each(|&c| gbnf_char(c, out, false));
                out.push('"');
            }
            Expr::Class { ranges, negated } => {
                out.push('[');
                if *negated {
                    out.push('^');
                }
                for &(lo, hi) in ranges {
                    gbnf_char(lo, out, true);
                    if hi != lo {
                        out.push('-');
                        gbnf_char(hi, out, true);
                    }
                }
                out.push(']');
            }
            Expr::Any => out.push('.'),
            _ => {
                return Err(ConvertError::NotExpressible {
                    rule: rule.to_string(),
                    what: "a special token".into(),
                    format: "GBNF",
                })
            }
        }
        Ok(())
    }
}

/// `e` at precedence `prec` (0: a rule body, 1: an alternative, 2: an
/// item of a sequence, 3: the operand of a repetition).
fn expr(
    e: &Expr,
    names: &HashMap<String, String>,
    rule: &str,
    out: &mut String,
    prec: u8,
    leaves: &dyn Leaves,
) -> Result<(), ConvertError> {
    match e {
        Expr::Alt(v) => {
            if prec > 0 {
                out.push('(');
            }
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                expr(x, names, rule, out, 1, leaves)?;
            }
            if prec > 0 {
                out.push(')');
            }
        }
        Expr::Seq(v) if v.is_empty() => out.push_str("\"\""),
        Expr::Seq(v) => {
            if prec > 1 && v.len() > 1 {
                out.push('(');
            }
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                expr(x, names, rule, out, 2, leaves)?;
            }
            if prec > 1 && v.len() > 1 {
                out.push(')');
            }
        }
        Expr::Ref { name, .. } => out.push_str(&names[name]),
        Expr::Repeat { expr: x, min, max } => {
            expr(x, names, rule, out, 3, leaves)?;
            match (min, max) {
                (0, None) => out.push('*'),
                (1, None) => out.push('+'),
                (0, Some(1)) => out.push('?'),
                (m, None) => {
                    let _ = write!(out, "{{{m},}}");
                }
                (m, Some(n)) if m == n => {
                    let _ = write!(out, "{{{m}}}");
                }
                (m, Some(n)) => {
                    let _ = write!(out, "{{{m},{n}}}");
                }
            }
        }
        leaf => leaves.leaf(leaf, rule, out, prec)?,
    }
    Ok(())
}

/// A Lark grammar with the language of `gbnf` (see the module docs).
pub fn gbnf_to_lark(gbnf: &Gbnf) -> Result<String, ConvertError> {
    let text = lark_text(gbnf, false)?;
    match Lark::parse(&gbnf.name, &text) {
        Ok(_) => Ok(text),
        Err(_) => {
            let chars = lark_text(gbnf, true)?;
            Lark::parse(&gbnf.name, &chars)?;
            Ok(chars)
        }
    }
}

/// The Lark text of `gbnf`; `split`: one character per lexeme.
fn lark_text(gbnf: &Gbnf, split: bool) -> Result<String, ConvertError> {
    let names = rename(&gbnf.rules, |n| {
        if n == "root" {
            return "start".into();
        }
        let mut s: String = n
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        if s == "start" || s.starts_with(|c: char| c.is_ascii_digit()) {
            s = format!("r_{s}");
        }
        s
    });
    let mut out = String::new();
    for r in &gbnf.rules {
        let mut body = String::new();
        expr(
            &r.body,
            &names,
            &r.name,
            &mut body,
            0,
            &LarkLeaves { split },
        )?;
        let _ = writeln!(out, "{}: {body}", names[&r.name]);
    }
    Ok(out)
}

fn lark_str_char(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7F => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => out.push(c),
    }
}

fn lark_class_char(c: char, out: &mut String) {
    match c {
        '\\' | ']' | '[' | '^' | '-' | '/' | '&' | '~' => {
            out.push('\\');
            out.push(c);
        }
        c if (c as u32) < 0x20 || c as u32 == 0x7F => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => out.push(c),
    }
}

/// Lark's leaves; `split`: a literal as one lexeme per character.
struct LarkLeaves {
    split: bool,
}

impl Leaves for LarkLeaves {
    fn leaf(&self, e: &Expr, rule: &str, out: &mut String, prec: u8) -> Result<(), ConvertError> {
        match e {
            Expr::Literal(cs) if self.split && cs.len() > 1 => {
                // Inside a sequence the characters need no group of their own.
                if prec == 3 {
                    out.push('(');
                }
                for (i, &c) in cs.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push('"');
                    lark_str_char(c, out);
                    out.push('"');
                }
                if prec == 3 {
                    out.push(')');
                }
            }
            Expr::Literal(cs) => {
                out.push('"');
                cs.iter().for_each(|&c| lark_str_char(c, out));
                out.push('"');
            }
            Expr::Class { ranges, negated } => {
                out.push_str("/[");
                if *negated {
                    out.push('^');
                }
                for &(lo, hi) in ranges {
                    lark_class_char(lo, out);
                    if hi != lo {
                        out.push('-');
                        lark_class_char(hi, out);
                    }
                }
                out.push_str("]/");
            }
            Expr::Any => out.push_str("/(?s:.)/"),
            _ => {
                return Err(ConvertError::NotExpressible {
                    rule: rule.to_string(),
                    what: "raw bytes".into(),
                    format: "Lark",
                })
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gbnf_round_trips_through_its_printer() {
        let g = Gbnf::parse(
            "t",
            "root ::= item (\",\" item)* | \"\"\nitem ::= [a-z\\]^-]+ | \"q\\\"\\n\" | [^x]{2,3} | .? num\nnum ::= [0-9]{1,}\n",
        )
        .unwrap();
        let lark = Lark::parse("t", &gbnf_to_lark(&g).unwrap()).unwrap();
        let back = Gbnf::parse("t", &lark_to_gbnf(&lark).unwrap()).unwrap();
        assert!(back.rules.len() >= g.rules.len());
    }

    #[test]
    fn strings_that_run_into_each_other_are_split_into_characters() {
        // `"ab" "c" | "abc" "d"` as lexemes: the greedy lexer would read
        // `abc` as one lexeme and refuse `abc` itself.
        let g = Gbnf::parse("t", "root ::= \"ab\" \"c\" | \"abc\" \"d\"\n").unwrap();
        let text = gbnf_to_lark(&g).unwrap();
        assert!(text.contains("\"a\" \"b\" \"c\" \"d\""), "{text}");
    }
}

//! # Which escapes JSON strings may use
//!
//! JSON spells `"`, `\` and control characters inside strings with escapes:
//! the short ones (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`) and `\uXXXX`.
//! [`Escapes`] is the set a schema's strings may use: all of them by
//! default, or a narrower set (llguidance's `json_allowed_escapes`, one
//! letter per escape, `u` for `\uXXXX`). Without `u`, control characters
//! that have no short escape cannot be written at all.
//!
//! A narrower set is exact where the generator writes strings from units it
//! builds here: free strings, counted strings, free keys and keys beside
//! declared names. Strings whose spelling comes from elsewhere (`pattern`,
//! `patternProperties`, `format`, `propertyNames`, `not`) are refused under
//! a narrower set, as is any string in the document (a property name, an
//! `enum` or `const` value) that needs an escape left out ([`check`]).

use super::{Pointer, SchemaError};
use serde_json::Value;

/// The escapes JSON strings may use (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Escapes(u8);

/// The short escapes, by the character after the backslash, in bit order.
const SHORT: [char; 7] = ['"', '\\', 'b', 'f', 'n', 'r', 't'];
/// The bit of `\uXXXX`.
const UNICODE: u8 = 1 << 7;

impl Default for Escapes {
    fn default() -> Self {
        Escapes::ALL
    }
}

impl Escapes {
    /// Every escape JSON has (but `\/`, which constrain never writes).
    pub const ALL: Escapes = Escapes(0xFF);

    /// The set named by llguidance's `json_allowed_escapes` letters
    /// (`"nrbtf\\\"u"` is all of them); `Err` names a letter that is none.
    pub fn parse(letters: &str) -> Result<Escapes, char> {
        let mut bits = 0u8;
        for c in letters.chars() {
            bits |= match c {
                'u' => UNICODE,
                c => match SHORT.iter().position(|&s| s == c) {
                    Some(i) => 1 << i,
                    None => return Err(c),
                },
            };
        }
        Ok(Escapes(bits))
    }

    /// Whether every escape is allowed.
    pub fn is_all(self) -> bool {
        self == Escapes::ALL
    }

    /// Whether `\uXXXX` is allowed.
    pub fn unicode(self) -> bool {
        self.0 & UNICODE != 0
    }

    /// Whether the short escape `\c` is allowed.
    pub(crate) fn allows_short(self, c: char) -> bool {
        SHORT
            .iter()
            .position(|&s| s == c)
            .is_some_and(|i| self.0 & (1 << i) != 0)
    }

    /// `\\[...]` for the allowed short escapes, as regex text (`None`: none).
    fn short_units(self) -> Option<String> {
        let cls: String = SHORT
            .iter()
            .filter(|&&c| self.allows_short(c))
            .map(|&c| {
                if c.is_ascii_alphabetic() {
                    c.to_string()
                } else {
                    format!("\\{c}")
                }
            })
            .collect();
        (!cls.is_empty()).then(|| format!("\\\\[{cls}]"))
    }

    /// One character of a string, as regex text: any character but `"`,
    /// `\` and controls (and U+007F with `general`), the allowed short
    /// escapes, and `\u00XX` for controls (`\uXXXX` for any character with
    /// `general`, surrogate pairs past U+FFFF) when `\u` is allowed;
    /// `with_u: false` leaves `\u` escapes out.
    pub(crate) fn unit(self, general: bool, with_u: bool) -> String {
        let mut parts = vec![if general {
            r#"[^"\\\x00-\x1F\x7F]"#.to_string()
        } else {
            r#"[^"\\\x00-\x1F]"#.to_string()
        }];
        parts.extend(self.short_units());
        if with_u && self.unicode() {
            parts.push(if general {
                concat!(
                    r"\\u(?:[0-9a-ce-fA-CE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}",
                    r"|[dD][89aAbB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                )
                .to_string()
            } else {
                r"\\u00[01][0-9a-fA-F]".to_string()
            });
        }
        format!("(?:{})", parts.join("|"))
    }

    /// Whether the canonical spelling of `s` (short escapes where they
    /// exist, `\u00XX` for other controls) uses only allowed escapes.
    pub fn spells(self, s: &str) -> bool {
        s.chars().all(|c| match c {
            '"' | '\\' => self.allows_short(c),
            '\u{8}' => self.allows_short('b'),
            '\u{c}' => self.allows_short('f'),
            '\n' => self.allows_short('n'),
            '\r' => self.allows_short('r'),
            '\t' => self.allows_short('t'),
            c if (c as u32) < 0x20 => self.unicode(),
            _ => true,
        })
    }
}

/// Keywords whose strings are not spelled from [`Escapes::unit`].
const REFUSED: [&str; 5] = [
    "pattern",
    "patternProperties",
    "format",
    "propertyNames",
    "not",
];

/// Under a narrower set than [`Escapes::ALL`]: refuses a document with a
/// keyword of [`REFUSED`], or with a string the output may hold (a property
/// name, a `required` name, an `enum` or `const` value) whose canonical
/// spelling needs an escape left out, naming where. Annotations
/// (`description`, `title`, ...) are not output and not checked.
pub(crate) fn check(schema: &Value, escapes: Escapes) -> Result<(), SchemaError> {
    if escapes.is_all() {
        return Ok(());
    }
    Check(escapes).schema(schema, &Pointer::root())
}

struct Check(Escapes);

impl Check {
    fn refuse(&self, at: &Pointer, detail: String) -> SchemaError {
        SchemaError::UnsupportedValue {
            what: "json_allowed_escapes".into(),
            pointer: at.clone(),
            detail,
        }
    }

    fn name(&self, s: &str, at: &Pointer) -> Result<(), SchemaError> {
        if self.0.spells(s) {
            Ok(())
        } else {
            Err(self.refuse(at, format!("{s:?} needs an escape that is not allowed")))
        }
    }

    /// Every string and key of a value that may be output.
    fn value(&self, v: &Value, at: &Pointer) -> Result<(), SchemaError> {
        match v {
            Value::String(s) => self.name(s, at),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .try_for_each(|(i, x)| self.value(x, &at.push_index(i))),
            Value::Object(m) => m.iter().try_for_each(|(k, x)| {
                let here = at.push(k);
                self.name(k, &here)?;
                self.value(x, &here)
            }),
            _ => Ok(()),
        }
    }

    fn schema(&self, v: &Value, at: &Pointer) -> Result<(), SchemaError> {
        let Value::Object(m) = v else {
            return Ok(());
        };
        for (k, x) in m {
            let here = at.push(k);
            match k.as_str() {
                k if REFUSED.contains(&k) => {
                    return Err(self.refuse(
                        &here,
                        format!("a narrower set of escapes is enforced on strings the compiler spells itself, not under \"{k}\""),
                    ))
                }
                "properties" | "dependentSchemas" | "$defs" | "definitions" => {
                    for (name, sub) in x.as_object().into_iter().flatten() {
                        let at = here.push(name);
                        if k != "$defs" && k != "definitions" {
                            self.name(name, &at)?;
                        }
                        self.schema(sub, &at)?;
                    }
                }
                "required" | "dependentRequired" | "enum" | "const" => self.value(x, &here)?,
                "items" | "prefixItems" | "additionalItems" | "contains" | "additionalProperties"
                | "unevaluatedProperties" | "unevaluatedItems" | "if" | "then" | "else"
                | "allOf" | "anyOf" | "oneOf" => match x {
                    Value::Array(a) => {
                        for (i, sub) in a.iter().enumerate() {
                            self.schema(sub, &here.push_index(i))?;
                        }
                    }
                    sub => self.schema(sub, &here)?,
                },
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(s: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{s})*$")).unwrap()
    }

    #[test]
    fn units_follow_the_allowed_set() {
        let all = re(&Escapes::ALL.unit(false, true));
        for t in [r"a", r"\n", r"\u001e", r"\u001E", r#"\""#, r"\\"] {
            assert!(all.is_match(t), "{t}");
        }
        assert!(!all.is_match(r"\u00e9") && !all.is_match(r"\/"));
        let nt = re(&Escapes::parse("nt").unwrap().unit(true, true));
        for t in [r"é", r"\n", r"\t"] {
            assert!(nt.is_match(t), "{t}");
        }
        for t in [r"\b", r"\u001e", r"\u00e9", r#"\""#] {
            assert!(!nt.is_match(t), "{t}");
        }
        let general = re(&Escapes::ALL.unit(true, true));
        for t in [r"\u00e9", r"\uD83D\uDE00", r"\u007f"] {
            assert!(general.is_match(t), "{t}");
        }
        for t in [r"\uD800", r"\uDE00\uD83D", "\u{7f}"] {
            assert!(!general.is_match(t), "{t}");
        }
        assert_eq!(Escapes::parse("nrbtf\\\"u"), Ok(Escapes::ALL));
        assert_eq!(Escapes::parse("nx"), Err('x'));
    }

    #[test]
    fn narrower_sets_refuse_what_they_cannot_spell() {
        let n = Escapes::parse("n").unwrap();
        assert!(check(&serde_json::json!({"properties": {"a\nb": {}}}), n).is_ok());
        let e = check(&serde_json::json!({"properties": {"a\tb": {}}}), n).unwrap_err();
        assert!(e.to_string().contains("/properties/a\tb"), "{e}");
        let e = check(&serde_json::json!({"items": {"pattern": "^a$"}}), n).unwrap_err();
        assert!(e.to_string().contains("/items/pattern"), "{e}");
        let e = check(&serde_json::json!({"enum": [{"k": "a\u{1e}"}]}), n).unwrap_err();
        assert!(e.to_string().contains("/enum/0/k"), "{e}");
        // Annotations are not output; a property named like a keyword is a name.
        let ok = serde_json::json!({"description": "a\tb", "properties": {"format": {}}});
        assert!(check(&ok, n).is_ok());
        assert!(check(&serde_json::json!({"pattern": "\t"}), Escapes::ALL).is_ok());
    }
}

//! # The JSON Schema oracle, with `multipleOf` read exactly
//!
//! Tests and the soak check outputs with the `jsonschema` crate. One keyword
//! is replaced: `multipleOf`. JSON Schema defines it as "division by this
//! keyword's value results in an integer", over the number the text
//! denotes; validators divide in floating point and disagree with each other
//! and with that definition (Python's `jsonschema` rejects 0.07 for 0.01,
//! the `jsonschema` crate 0.33 accepts 0.07 but rejects 2.01 and every
//! negative multiple). constrain compiles a fractional `multipleOf` exactly
//! over the decimal text (`docs/json-schema.md`, "decimal multipleOf"), and MaskBench's
//! labels read it so too; this oracle does the same, in exact integer
//! arithmetic over the shortest decimal text of each number (what Rust's
//! `Display` for `f64` prints, which round-trips the parsed value).
//! Numbers whose digits overflow 128 bits fall back to the floating-point
//! test.

use jsonschema::paths::{LazyLocation, Location};
use jsonschema::{Keyword, ValidationError, Validator};
use serde_json::{Map, Value};

/// A validator for `schema` (draft detected from `$schema`, as
/// `jsonschema::validator_for`) whose `multipleOf` is exact over decimals.
pub fn validator_for(schema: &Value) -> Result<Validator, ValidationError<'static>> {
    jsonschema::options()
        .with_keyword("multipleOf", multiple_of_factory)
        .build(schema)
        .map_err(|e| e.to_owned())
}

fn multiple_of_factory<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    path: Location,
) -> Result<Box<dyn Keyword>, ValidationError<'a>> {
    match value.as_f64() {
        Some(m) if m > 0.0 => Ok(Box::new(MultipleOf {
            text: number_text(value),
            m,
        })),
        _ => Err(ValidationError::custom(
            Location::new(),
            path,
            value,
            "multipleOf must be a number above 0",
        )),
    }
}

struct MultipleOf {
    /// The divisor's decimal text.
    text: String,
    m: f64,
}

impl Keyword for MultipleOf {
    fn validate<'i>(
        &self,
        instance: &'i Value,
        location: &LazyLocation,
    ) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            Ok(())
        } else {
            Err(ValidationError::custom(
                Location::new(),
                location.into(),
                instance,
                format!("{instance} is not a multiple of {}", self.text),
            ))
        }
    }

    fn is_valid(&self, instance: &Value) -> bool {
        if !instance.is_number() {
            return true;
        }
        match is_decimal_multiple(&number_text(instance), &self.text) {
            Some(ok) => ok,
            None => {
                let q = instance.as_f64().unwrap_or(f64::NAN) / self.m;
                q.is_finite() && q.fract() == 0.0
            }
        }
    }
}

/// The shortest decimal text of a JSON number (integers as written).
fn number_text(v: &Value) -> String {
    if let Some(i) = v.as_i64() {
        i.to_string()
    } else if let Some(u) = v.as_u64() {
        u.to_string()
    } else {
        // `Display` for f64: shortest round-trip digits, never an exponent.
        format!("{}", v.as_f64().unwrap_or(f64::NAN))
    }
}

/// Digits without the point and the number of fraction digits of plain
/// decimal text (sign dropped); `None` past 128 bits or for other text.
fn decimal(text: &str) -> Option<(u128, u32)> {
    let rest = text.strip_prefix('-').unwrap_or(text);
    let (i, f) = rest.split_once('.').unwrap_or((rest, ""));
    let f = f.trim_end_matches('0');
    if i.is_empty() || !i.bytes().chain(f.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: u128 = format!("{i}{f}").parse().ok()?;
    Some((digits, f.len() as u32))
}

/// Whether `x / m` is an integer, exactly: `x = xd / 10^xs`, `m = md /
/// 10^ms`, so `x / m = xd·10^ms / (md·10^xs)`. `None` when the arithmetic
/// would overflow.
fn is_decimal_multiple(x: &str, m: &str) -> Option<bool> {
    let (xd, xs) = decimal(x)?;
    let (md, ms) = decimal(m)?;
    if md == 0 {
        return None;
    }
    let num = xd.checked_mul(10u128.checked_pow(ms)?)?;
    let den = md.checked_mul(10u128.checked_pow(xs)?)?;
    Some(num % den == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimal_multiples_are_exact() {
        let v = validator_for(&json!({"multipleOf": 0.01})).unwrap();
        for ok in [
            json!(0.07),
            json!(2.01),
            json!(-500.25),
            json!(10.99),
            json!(3),
            json!(0),
        ] {
            assert!(v.is_valid(&ok), "{ok} should be a multiple of 0.01");
        }
        for bad in [json!(10.001), json!(0.005), json!(-1.234)] {
            assert!(!v.is_valid(&bad), "{bad} is not a multiple of 0.01");
            assert!(v.validate(&bad).is_err());
        }
        // Not numbers: not constrained.
        assert!(v.is_valid(&json!("0.001")));
    }

    #[test]
    fn integer_and_nested_multiples() {
        let v = validator_for(&json!({
            "type": "object",
            "properties": {"n": {"anyOf": [{"multipleOf": 3}, {"multipleOf": 0.25}]}}
        }))
        .unwrap();
        assert!(v.is_valid(&json!({"n": 9})));
        assert!(v.is_valid(&json!({"n": -0.75})));
        assert!(!v.is_valid(&json!({"n": 1.1})));
        // Other keywords are the crate's own.
        let w = validator_for(&json!({"type": "integer", "maximum": 3})).unwrap();
        assert!(w.is_valid(&json!(3)));
        assert!(!w.is_valid(&json!(4)));
        assert!(!w.is_valid(&json!("x")));
    }

    #[test]
    fn bad_divisor_is_a_schema_error() {
        assert!(validator_for(&json!({"multipleOf": 0})).is_err());
        assert!(validator_for(&json!({"multipleOf": -2})).is_err());
    }
}

//! Scalar leaves: literals (`enum`/`const`), numbers (integer and decimal
//! ranges, `multipleOf`) and strings (length, `pattern`, `format`). Split
//! from `regex.rs` by job; moved as is.

use super::*;

impl<'d, 'a> Gen<'d, 'a> {
    #[inline(never)]
    pub(super) fn literal(&self, v: &Value) -> String {
        let Layout {
            inner,
            comma,
            colon,
        } = &self.lay.text;
        match v {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => number_literal(n),
            Value::String(s) => regex_syntax::escape(&py_string(s)),
            Value::Array(a) => {
                let items: Vec<String> = a.iter().map(|x| self.literal(x)).collect();
                format!("\\[{inner}{}{inner}\\]", items.join(comma))
            }
            Value::Object(m) => {
                let items: Vec<String> = m
                    .iter()
                    .map(|(k, x)| {
                        format!(
                            "{}{colon}{}",
                            regex_syntax::escape(&py_string(k)),
                            self.literal(x)
                        )
                    })
                    .collect();
                format!("\\{{{inner}{}{inner}\\}}", items.join(comma))
            }
        }
    }

    #[inline(never)]
    pub(super) fn number(&mut self, n: &Node, types: Types) -> Result<Lang, SchemaError> {
        let integer_only = !types.has(Types::NUMBER);
        if n.fractional {
            return self.fractional_number(n, types);
        }
        if !n.not_multiple_of.is_empty() {
            return self.not_multiple_number(n);
        }
        let lo = n.minimum.as_ref();
        let hi = n.maximum.as_ref();
        if let Some(m) = &n.multiple_of {
            if m.value.is_integer() {
                // A number that is a multiple of an integer may also be
                // written with a zero fraction (`1000.0`): validators, which
                // read numbers, accept it.
                let r = self.integer_multiples(n, lo, hi)?;
                return Ok(if integer_only {
                    r
                } else {
                    r.map(|r| rx!["(?:", r, ")(?:\\.0+)?"])
                });
            }
            return self.decimal_multiple_of(n, integer_only);
        }
        if integer_only {
            let (l, h) = numeric::integer_bounds(lo, hi);
            if let (Some(a), Some(b)) = (lo, hi) {
                if a.value > b.value {
                    return self.contradiction(SchemaError::Contradiction {
                        pointer: n.at.clone(),
                        detail: format!("minimum {} is greater than maximum {}", a.value, b.value),
                    });
                }
            }
            Ok(text_lang(numeric::int_range(l.as_ref(), h.as_ref())))
        } else {
            if let (Some(a), Some(b)) = (lo, hi) {
                if a.value > b.value {
                    return self.contradiction(SchemaError::Contradiction {
                        pointer: n.at.clone(),
                        detail: format!("minimum {} is greater than maximum {}", a.value, b.value),
                    });
                }
            }
            Ok(text_lang(numeric::decimal_range(lo, hi)))
        }
    }

    /// Integers that are multiples of an integer `multipleOf`: by their last
    /// digits for divisors of a power of ten (within any bounds), enumerated
    /// within bounds, and otherwise narrowed (warning) to `max_enumerated_multiples`
    /// multiples from the one bound or around 0.
    fn integer_multiples(
        &mut self,
        n: &Node,
        lo: Option<&numeric::Bound>,
        hi: Option<&numeric::Bound>,
    ) -> Result<Lang, SchemaError> {
        let m = n.multiple_of.as_ref().expect("a multipleOf");
        let Some(k) = m.value.to_i128() else {
            return self.soft_number(n, "multipleOf too large");
        };
        let (l, h) = numeric::integer_bounds(lo, hi);
        if k == 1 {
            return Ok(text_lang(numeric::int_range(l.as_ref(), h.as_ref())));
        }
        // The last-digit rule writes at most 15 digits; a range beyond that
        // with both bounds is listed instead.
        let past_15_digits = |v: &Option<numeric::Dec>| {
            v.as_ref()
                .is_some_and(|v| v.to_i128().is_none_or(|v| v.abs() >= 10i128.pow(15)))
        };
        let listed = l.is_some() && h.is_some() && (past_15_digits(&l) || past_15_digits(&h));
        if let Some(r) = u64::try_from(k)
            .ok()
            .filter(|_| !listed)
            .and_then(|k| numeric::suffix_multiples(l.as_ref(), h.as_ref(), k))
        {
            return Ok(text_lang(r));
        }
        if let (Some(l), Some(h)) = (&l, &h) {
            let (Some(li), Some(hi_)) = (l.to_i128(), h.to_i128()) else {
                return self.soft_number(n, "bounds too large for multipleOf");
            };
            if hi_ < li {
                return Ok(None);
            }
            let count = ((hi_ - li) / k) as u64;
            if count > self.opts.max_enumerated_multiples {
                return Err(SchemaError::TooBig {
                    what: "multipleOf values in range".into(),
                    pointer: m.at.clone(),
                    size: count,
                    limit: self.opts.max_enumerated_multiples,
                    knob: "max_enumerated_multiples",
                });
            }
            return Ok(text_lang(numeric::enumerate_multiples(li, hi_, k)));
        }
        // No bounded range and no last-digit rule: narrowed to a window of
        // `max_enumerated_multiples` multiples (sound, with a warning; the
        // remainder automaton's regex is too large, see `residue`).
        // At most 15 digits, as for the last-digit rule (past 2^53 a
        // validator reading numbers as `f64` may round onto a multiple).
        const CAP: i128 = 999_999_999_999_999;
        let span = k.saturating_mul(self.opts.max_enumerated_multiples.max(1) as i128 - 1);
        let (wa, wb) = match (
            l.as_ref().map(|v| v.to_i128()),
            h.as_ref().map(|v| v.to_i128()),
        ) {
            (Some(Some(a)), _) => (a, a.saturating_add(span)),
            (_, Some(Some(b))) => (b.saturating_sub(span), b),
            (None, None) => (-(span / 2), span / 2),
            _ => return self.soft_number(n, "bounds too large for multipleOf"),
        };
        let (wa, wb) = (wa.max(-CAP), wb.min(CAP));
        self.doc.warn(
            &m.at,
            format!(
                "multipleOf {} without a bounded range: narrowed to the multiples in [{wa}, {wb}] (max_enumerated_multiples)",
                m.value
            ),
        );
        Ok(text_lang(numeric::enumerate_multiples(wa, wb, k)))
    }

    pub(super) fn soft_number(&mut self, n: &Node, detail: &str) -> Result<Lang, SchemaError> {
        self.doc.soft(
            SchemaError::UnsupportedValue {
                what: "multipleOf".into(),
                pointer: n
                    .multiple_of
                    .as_ref()
                    .map(|m| m.at.clone())
                    .unwrap_or_default(),
                detail: detail.into(),
            },
            self.opts.lenient,
        )?;
        let (l, h) = numeric::integer_bounds(n.minimum.as_ref(), n.maximum.as_ref());
        Ok(text_lang(numeric::int_range(l.as_ref(), h.as_ref())))
    }

    #[inline(never)]
    pub(super) fn string(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        let min = n.min_length.unwrap_or(0);
        let max = n.max_length;
        if let Some(m) = max {
            if m < min {
                return self.contradiction(SchemaError::Contradiction {
                    pointer: n.at.clone(),
                    detail: format!("minLength {min} is greater than maxLength {m}"),
                });
            }
        }
        let mut max = max;
        if let (Some(cap), Some(m)) = (self.opts.max_length_cap, max) {
            if m > cap.max(min) {
                max = Some(cap.max(min));
                self.doc.warn(
                    &n.at,
                    format!(
                        "maxLength {m} narrowed to {} (max_length_cap)",
                        cap.max(min)
                    ),
                );
            }
        }
        let big = max.unwrap_or(min);
        if big > self.opts.max_repeat {
            return Err(SchemaError::TooBig {
                what: "string length bound".into(),
                pointer: n.at.clone(),
                size: big,
                limit: self.opts.max_repeat,
                knob: "max_repeat",
            });
        }
        let lenient = self.opts.lenient;
        if n.patterns.len() + n.formats.len() > 1 {
            let at = n
                .patterns
                .first()
                .map(|p| p.at.clone())
                .unwrap_or_else(|| n.at.clone());
            self.doc.soft(
                SchemaError::UnsupportedValue {
                    what: "string constraints".into(),
                    pointer: at,
                    detail: "several patterns/formats on one string (their intersection)".into(),
                },
                lenient,
            )?;
        } else if let Some(f) = n.formats.first() {
            let re = formats::format_regex(&f.value).expect("supported format");
            let restricted = self.pattern_regex(&re, min, max, true);
            if !matches!(restricted, Ok(ref c) if c.narrowed.is_none()) {
                if let Some(exact) = self.length_product(&format!("\"{re}\""), min, max, &f.at) {
                    return Ok(exact);
                }
            }
            return match restricted {
                Ok(c) => {
                    if let Some(w) = c.narrowed {
                        self.doc.warn(&f.at, format!("format \"{}\": {w}", f.value));
                    }
                    Ok(c.regex.map(|r| rx!["\"", r, "\""]))
                }
                Err(e) => {
                    self.doc.soft(
                        SchemaError::UnsupportedValue {
                            what: "format".into(),
                            pointer: f.at.clone(),
                            detail: format!("format \"{}\" with length bounds: {e}", f.value),
                        },
                        lenient,
                    )?;
                    Ok(Some(rx!["\"", re, "\""]))
                }
            };
        } else if let Some(p) = n.patterns.first() {
            let compiled = self.pattern_regex(&p.value, min, max, false);
            if !matches!(compiled, Ok(ref c) if c.narrowed.is_none()) {
                if let Ok(free) = self.pattern_regex(&p.value, 0, None, false) {
                    if let Some(l) = free.regex {
                        if let Some(exact) =
                            self.length_product(&format!("\"{l}\""), min, max, &p.at)
                        {
                            return Ok(exact);
                        }
                    } else {
                        return Ok(None);
                    }
                }
            }
            match compiled {
                Ok(c) => {
                    if let Some(w) = c.narrowed {
                        self.doc.warn(&p.at, w);
                    }
                    return Ok(c.regex.map(|r| rx!["\"", r, "\""]));
                }
                Err(e) => {
                    self.doc.soft(
                        SchemaError::Pattern {
                            pointer: p.at.clone(),
                            detail: format!("{:?}: {e}", p.value),
                        },
                        lenient,
                    )?;
                }
            }
        }
        if min == 0 && max.is_none() {
            return Ok(Some(self.string_any()));
        }
        // Counted: the short character form keeps each counted position small
        // (no `\u00XX` escapes: about 9 DFA states per position instead of 13).
        Ok(Some(rx![
            "\"",
            self.string_char(true),
            repeat(min, max),
            "\""
        ]))
    }

    /// A quoted string language (a pattern or format) cut to `min..=max`
    /// characters exactly, by a product with the counted string language:
    /// used where the pattern's own shape cannot carry the bounds (it would
    /// otherwise be narrowed, or be an error). `None` when the product is
    /// over its bounds (`max_product_states` / `max_product_len`); the
    /// caller then narrows or reports as before. `Some(None)`: no string
    /// of the pattern has an allowed length.
    fn length_product(
        &self,
        quoted: &str,
        min: u64,
        max: Option<u64>,
        at: &Pointer,
    ) -> Option<Lang> {
        if (min == 0 && max.is_none()) || max.unwrap_or(min) as usize > self.opts.max_product_states
        {
            return None;
        }
        // Canonical spellings only (no `\u` escapes), so that counting
        // `KEY_CHAR`s counts characters.
        let counted = format!("\"{KEY_CHAR}{}\"", repeat(min, max));
        self.combine(
            quoted,
            &counted,
            crate::dfa::algebra::Op::And,
            "pattern with length bounds",
            at,
        )
        .ok()
    }
}

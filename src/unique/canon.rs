//! Canonical forms of JSON values: equal values, equal bytes.

/// The canonical form of a JSON value's text: equal values, equal forms.
pub(crate) fn canonical(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 2);
    let mut p = Canon { s: raw, i: 0 };
    if p.value(&mut out).is_none() {
        out.clear();
        out.push(b'!');
        out.extend_from_slice(raw);
    }
    out
}

struct Canon<'a> {
    s: &'a [u8],
    i: usize,
}

impl Canon<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn value(&mut self, out: &mut Vec<u8>) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                out.extend_from_slice(&serde_json::to_vec(&s).ok()?);
            }
            b'{' => {
                self.i += 1;
                let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let k = serde_json::to_vec(&self.string()?).ok()?;
                        self.ws();
                        (self.peek()? == b':').then_some(())?;
                        self.i += 1;
                        let mut v = Vec::new();
                        self.value(&mut v)?;
                        // A repeated key: the last one counts.
                        members.retain(|(m, _)| *m != k);
                        members.push((k, v));
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b'}' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                members.sort();
                out.push(b'{');
                for (j, (k, v)) in members.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(k);
                    out.push(b':');
                    out.extend_from_slice(v);
                }
                out.push(b'}');
            }
            b'[' => {
                self.i += 1;
                out.push(b'[');
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                } else {
                    let mut first = true;
                    loop {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        self.value(out)?;
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b']' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                out.push(b']');
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|b| matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                {
                    self.i += 1;
                }
                out.extend_from_slice(&canonical_number(&self.s[start..self.i])?);
            }
            _ => {
                let start = self.i;
                while self.peek().is_some_and(|b| b.is_ascii_lowercase()) {
                    self.i += 1;
                }
                out.extend_from_slice(&self.s[start..self.i]);
            }
        }
        Some(())
    }

    fn string(&mut self) -> Option<String> {
        let start = self.i;
        (self.peek()? == b'"').then_some(())?;
        self.i += 1;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    break;
                }
                _ => self.i += 1,
            }
        }
        serde_json::from_slice(self.s.get(start..self.i)?).ok()
    }
}

/// A JSON number as an exact decimal: `[-]digits e exponent`, no leading
/// or trailing zeros in the digits (`0` for zero, either sign).
fn canonical_number(t: &[u8]) -> Option<Vec<u8>> {
    let (neg, t) = match t.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, t),
    };
    let (mant, exp) = match t.iter().position(|&b| b == b'e' || b == b'E') {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, &b""[..]),
    };
    let (int, frac) = match mant.iter().position(|&b| b == b'.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, &b""[..]),
    };
    let mut exp: i128 = if exp.is_empty() {
        0
    } else {
        let s = std::str::from_utf8(exp).ok()?;
        let s = s.strip_prefix('+').unwrap_or(s);
        // Exponents past any i64 are clamped: such numbers are not written
        // by a model within any budget this check serves.
        s.parse::<i128>().unwrap_or(if s.starts_with('-') {
            -(1 << 100)
        } else {
            1 << 100
        })
    };
    let mut digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    exp -= frac.len() as i128;
    let lead = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..lead);
    while digits.last() == Some(&b'0') {
        digits.pop();
        exp += 1;
    }
    if digits.is_empty() {
        return Some(b"0".to_vec());
    }
    let mut out = Vec::with_capacity(digits.len() + 8);
    if neg {
        out.push(b'-');
    }
    out.extend_from_slice(&digits);
    out.extend_from_slice(format!("e{exp}").as_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_have_equal_forms() {
        let same = [
            (&b"1"[..], &b"1.0"[..]),
            (b"1", b"10e-1"),
            (b"-0", b"0.000"),
            (b"120", b"1.2E2"),
            (b"\"a\"", b"\"\\u0061\""),
            (b"\"\\n\"", b"\"\\u000a\""),
            (
                b"{\"a\": 1, \"b\": [true, null]}",
                b"{\"b\":[true,null],\"a\":1.0}",
            ),
        ];
        for (a, b) in same {
            assert_eq!(
                canonical(a),
                canonical(b),
                "{:?} vs {:?}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
        let differ = [
            (&b"1"[..], &b"\"1\""[..]),
            (b"1", b"1.01"),
            (b"-1", b"1"),
            (b"[1,2]", b"[2,1]"),
            (b"\"a\"", b"\"A\""),
            (b"{\"a\":1}", b"{\"a\":1,\"b\":1}"),
        ];
        for (a, b) in differ {
            assert_ne!(
                canonical(a),
                canonical(b),
                "{:?} vs {:?}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
    }
}

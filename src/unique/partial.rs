//! Whether the text of an unfinished item could still become a given value:
//! the test that decides which items are at risk of ending as a duplicate,
//! for items of any kind (objects compare by keys in any order, numbers as
//! exact decimals).

use super::canon::canonical;
use serde_json::Value;

/// Where the text of an unfinished item stops, for the tokens worth trying.
#[derive(Debug)]
pub(super) struct Next {
    /// Inside a string that must go on as some earlier item's: the first
    /// byte of what comes next there (its canonical spelling; `"` where the
    /// string is complete).
    pub bytes: [bool; 256],
    /// The same, whole: the canonical spelling of the rest of each such
    /// string, closing quote included.
    pub rests: Vec<Vec<u8>>,
    /// The text stops outside a string (any token may matter).
    pub anywhere: bool,
}

impl Next {
    pub(super) fn new() -> Next {
        Next {
            bytes: [false; 256],
            rests: Vec::new(),
            anywhere: false,
        }
    }
}

/// Whether `partial` (the raw text of an unfinished JSON value) can go on
/// to a text whose value equals `u`; where it can, `next` learns what the
/// text would continue with.
pub(super) fn may_become(partial: &[u8], u: &Value, next: &mut Next) -> bool {
    let mut p = Reader {
        s: partial,
        i: 0,
        in_string: false,
    };
    p.value(u, next)
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
    /// The text stopped inside a string (not after a whole value).
    in_string: bool,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn end(&self) -> bool {
        self.i >= self.s.len()
    }

    /// A string from its opening quote: the characters read, and whether
    /// it closed (an escape or a character cut at the end is left out).
    fn string(&mut self) -> (String, bool) {
        let start = self.i + 1;
        let mut j = start;
        let mut last_whole = start;
        while j < self.s.len() {
            match self.s[j] {
                b'"' => {
                    let text = decode(&self.s[start..j]);
                    self.i = j + 1;
                    return (text, true);
                }
                b'\\' => {
                    let len = if self.s.get(j + 1) == Some(&b'u') {
                        6
                    } else {
                        2
                    };
                    if j + len > self.s.len() {
                        break;
                    }
                    j += len;
                }
                _ => j += 1,
            }
            last_whole = j;
        }
        self.i = self.s.len();
        (decode(&self.s[start..last_whole]), false)
    }

    /// Reads a value that must equal `u`: `false` as soon as it cannot.
    fn value(&mut self, u: &Value, next: &mut Next) -> bool {
        self.ws();
        if self.end() {
            next.anywhere = true;
            return true;
        }
        match self.s[self.i] {
            b'"' => {
                let Value::String(us) = u else { return false };
                let (text, closed) = self.string();
                if closed {
                    return *us == text;
                }
                self.in_string = true;
                string_next(us, &text, next)
            }
            b'{' => {
                self.i += 1;
                let Value::Object(m) = u else { return false };
                let mut keys: Vec<String> = Vec::new();
                loop {
                    self.ws();
                    if self.end() {
                        next.anywhere = true;
                        return true;
                    }
                    match self.s[self.i] {
                        b'}' => {
                            self.i += 1;
                            return keys.len() == m.len();
                        }
                        b',' => {
                            self.i += 1;
                            if keys.len() == m.len() {
                                return false;
                            }
                        }
                        b'"' => {
                            let (k, closed) = self.string();
                            if !closed {
                                let mut any = false;
                                for key in m.keys().filter(|key| !keys.contains(key)) {
                                    any |= string_next(key, &k, next);
                                }
                                return any;
                            }
                            let Some(v) = m.get(&k) else { return false };
                            if keys.contains(&k) {
                                return false;
                            }
                            keys.push(k);
                            self.ws();
                            if self.end() {
                                next.anywhere |= !self.in_string;
                                return true;
                            }
                            if self.s[self.i] != b':' {
                                return false;
                            }
                            self.i += 1;
                            if !self.value(v, next) {
                                return false;
                            }
                            if self.end() {
                                next.anywhere |= !self.in_string;
                                return true;
                            }
                        }
                        _ => return false,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let Value::Array(a) = u else { return false };
                let mut n = 0;
                loop {
                    self.ws();
                    if self.end() {
                        next.anywhere = true;
                        return true;
                    }
                    match self.s[self.i] {
                        b']' => {
                            self.i += 1;
                            return n == a.len();
                        }
                        b',' => {
                            self.i += 1;
                            if n == a.len() {
                                return false;
                            }
                        }
                        _ => {
                            let Some(v) = a.get(n) else { return false };
                            n += 1;
                            if !self.value(v, next) {
                                return false;
                            }
                            if self.end() {
                                next.anywhere |= !self.in_string;
                                return true;
                            }
                        }
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'
                    )
                {
                    self.i += 1;
                }
                if !u.is_number() {
                    return false;
                }
                if self.end() {
                    // The number may go on: any spelling could still come.
                    next.anywhere = true;
                    return true;
                }
                let want = serde_json::to_vec(u)
                    .map(|t| canonical(&t))
                    .unwrap_or_default();
                canonical(&self.s[start..self.i]) == want
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i].is_ascii_lowercase() {
                    self.i += 1;
                }
                let text = &self.s[start..self.i];
                let want: &[u8] = match u {
                    Value::Bool(true) => b"true",
                    Value::Bool(false) => b"false",
                    Value::Null => b"null",
                    _ => return false,
                };
                if self.end() {
                    next.anywhere = true;
                    return want.starts_with(text);
                }
                want == text
            }
        }
    }
}

/// Inside a string whose text so far is `text`, that must go on to
/// `target`: whether it can, noting the next byte.
fn string_next(target: &str, text: &str, next: &mut Next) -> bool {
    let Some(rest) = target.strip_prefix(text) else {
        return false;
    };
    let mut spelled = serde_json::to_vec(rest).unwrap_or_default();
    spelled.remove(0);
    next.rests.push(spelled);
    match rest.chars().next() {
        Some(c) => {
            let spelled = serde_json::to_vec(&c.to_string()).unwrap_or_default();
            if let Some(&b) = spelled.get(1) {
                next.bytes[b as usize] = true;
            }
            // Any character may also be spelled `\uXXXX`.
            next.bytes[b'\\' as usize] = true;
        }
        None => next.bytes[b'"' as usize] = true,
    }
    true
}

/// The characters of a JSON string's body (between the quotes): escapes
/// decoded; an escape or a multi-byte character cut at the end is left out,
/// and so is everything from a byte that cannot be there.
fn decode(body: &[u8]) -> String {
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let run = body[i..]
            .iter()
            .position(|&b| b == b'\\' || b < 0x20)
            .map_or(body.len(), |k| i + k);
        match std::str::from_utf8(&body[i..run]) {
            Ok(s) => out.push_str(s),
            Err(e) => {
                // Whole characters before a cut (or a bad byte).
                out.push_str(&String::from_utf8_lossy(&body[i..i + e.valid_up_to()]));
                return out;
            }
        }
        i = run;
        if i >= body.len() || body[i] != b'\\' {
            return out;
        }
        let Some(&e) = body.get(i + 1) else {
            return out;
        };
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let Some(hi) = hex4(body, i + 2) else {
                    return out;
                };
                i += 6;
                if (0xD800..0xDC00).contains(&hi) {
                    // A high surrogate: its low half follows as `\uXXXX`.
                    if body.get(i) != Some(&b'\\') || body.get(i + 1) != Some(&b'u') {
                        return out;
                    }
                    let Some(lo) = hex4(body, i + 2) else {
                        return out;
                    };
                    if !(0xDC00..0xE000).contains(&lo) {
                        return out;
                    }
                    i += 6;
                    let code = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    match char::from_u32(code) {
                        Some(c) => out.push(c),
                        None => return out,
                    }
                } else {
                    match char::from_u32(hi) {
                        Some(c) => out.push(c),
                        None => return out,
                    }
                }
                continue;
            }
            _ => return out,
        };
        out.push(c);
        i += 2;
    }
    out
}

/// The four hex digits at `at`, as a number.
fn hex4(body: &[u8], at: usize) -> Option<u32> {
    let digits = body.get(at..at + 4)?;
    let s = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decode_agrees_with_serde_json_and_stops_at_a_cut() {
        for body in [
            r#"plain"#,
            r#"a\"b\\c\/d\b\f\n\r\t"#,
            r#"\u0061\u00e9\u20ac\ud83d\ude00x"#,
            "déjà vu 😀",
            r#"\\b[a-z]+\\b"#,
            "",
        ] {
            let quoted = format!("\"{body}\"");
            let want: String = serde_json::from_str(&quoted).unwrap();
            assert_eq!(decode(body.as_bytes()), want, "{body}");
        }
        // Cut inside an escape, a surrogate pair or a character: what is
        // whole before it.
        assert_eq!(decode(br#"ab\"#), "ab");
        assert_eq!(decode(br#"ab\u00"#), "ab");
        assert_eq!(decode(br#"a\ud83d"#), "a");
        assert_eq!(decode(br#"a\ud83d\ude"#), "a");
        assert_eq!(decode("xé".as_bytes().split_last().unwrap().1), "x");
    }

    #[test]
    fn partial_texts_against_values() {
        let u = json!({"name": "ab", "n": 1, "tags": ["x", true]});
        let may = |p: &str| may_become(p.as_bytes(), &u, &mut Next::new());
        for p in [
            "{",
            r#"{"n": 1.0, "na"#,
            r#"{"tags": ["x", tr"#,
            r#"{"name": "a"#,
            r#"{"name": "\u0061b", "n": 1"#,
            r#"{"n": 1, "tags": ["x", true], "name": "ab"#,
        ] {
            assert!(may(p), "{p}");
        }
        for p in [
            "[",
            r#"{"n": 2,"#,
            r#"{"name": "ac"#,
            r#"{"tags": ["x", true, "#,
            r#"{"other"#,
            r#"{"n": 1, "n""#,
            r#"{"name": "ab"}"#,
        ] {
            assert!(!may(p), "{p}");
        }
        let mut next = Next::new();
        assert!(may_become(br#"{"name": "a"#, &u, &mut next));
        assert!(next.bytes[b'b' as usize] && !next.anywhere);
        let mut next = Next::new();
        assert!(may_become(br#"{"n": 1, "name": "ab""#, &u, &mut next));
        assert!(next.anywhere, "a value just ended: any token may matter");
        let mut next = Next::new();
        assert!(may_become(br#"{"na"#, &u, &mut next));
        assert!(next.bytes[b'm' as usize] && !next.bytes[b'"' as usize]);
    }
}

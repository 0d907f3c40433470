//! # Whitespace policy
//!
//! Where JSON allows whitespace (around `,` `:` and inside brackets), the
//! regex inserts one *slot*. The policy decides what a slot admits:
//!
//! - [`Whitespace::Compact`]: nothing (`{"a":1,"b":[1,2]}`), the default.
//! - [`Whitespace::Python`]: exactly what Python's `json.dumps` writes with its
//!   default separators: `", "` between items, `": "` after keys, nothing
//!   inside brackets (`{"a": 1, "b": [1, 2]}`).
//! - [`Whitespace::Flexible`]: any JSON whitespace (`[ \t\n\r]`) but at most
//!   `max` bytes per slot. Never unbounded: a model may loop on whitespace.
//!   `json.dumps` output always fits when `max >= 1`.

/// Whitespace policy between JSON tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Whitespace {
    /// No whitespace at all.
    #[default]
    Compact,
    /// `", "` and `": "`, as Python's `json.dumps` writes.
    Python,
    /// Up to `max` JSON whitespace bytes in every slot.
    Flexible {
        /// The most whitespace bytes per slot.
        max: usize,
    },
}

/// The separators of one policy, as regex fragments.
#[derive(Clone, Debug)]
pub struct Layout {
    /// After `[` / `{` and before `]` / `}` (also the inside of `[]`).
    pub inner: String,
    /// Between items: `,` with its surrounding slots.
    pub comma: String,
    /// Between a key and its value: `:` with its surrounding slots.
    pub colon: String,
}

impl Whitespace {
    /// The regex fragments of this policy.
    pub fn layout(&self) -> Layout {
        match *self {
            Whitespace::Compact => Layout {
                inner: String::new(),
                comma: ",".into(),
                colon: ":".into(),
            },
            Whitespace::Python => Layout {
                inner: String::new(),
                comma: ", ".into(),
                colon: ": ".into(),
            },
            Whitespace::Flexible { max } => {
                let ws = if max == 0 {
                    String::new()
                } else {
                    format!("[\\t\\n\\r ]{{0,{max}}}")
                };
                Layout {
                    inner: ws.clone(),
                    comma: format!("{ws},{ws}"),
                    colon: format!("{ws}:{ws}"),
                }
            }
        }
    }
}

impl std::str::FromStr for Whitespace {
    type Err = String;
    /// `compact`, `python`, `flexible` (max 2) or `flexible:N`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compact" => Ok(Whitespace::Compact),
            "python" => Ok(Whitespace::Python),
            "flexible" => Ok(Whitespace::Flexible { max: 2 }),
            _ => match s.strip_prefix("flexible:") {
                Some(n) => n
                    .parse()
                    .map(|max| Whitespace::Flexible { max })
                    .map_err(|_| format!("bad whitespace bound {n:?}: expected a number")),
                None => Err(format!(
                    "unknown whitespace policy {s:?}: expected compact, python, flexible or flexible:N"
                )),
            },
        }
    }
}

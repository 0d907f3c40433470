//! The schema compiler's options, shared by every command that takes `--schema`.

use constrain::schema::{JsonMode, SchemaOptions, Whitespace};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum WhitespaceArg {
    /// No whitespace: `{"a":1}`.
    Compact,
    /// `", "` and `": "`, as Python's json.dumps writes.
    Python,
    /// Any JSON whitespace, at most --max-whitespace bytes per slot.
    Flexible,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum JsonModeArg {
    /// Generation semantics: no extra keys unless additionalProperties allows them.
    Strict,
    /// JSON Schema's own meaning: absent additionalProperties allows extra keys.
    Compliant,
}

/// Options for compiling a JSON Schema.
#[derive(clap::Args, Clone, Debug)]
pub struct SchemaArgs {
    /// Whitespace policy between JSON tokens.
    #[arg(long, value_enum, default_value = "compact")]
    pub whitespace: WhitespaceArg,
    /// Most whitespace bytes per slot with --whitespace flexible.
    #[arg(long, default_value_t = 2)]
    pub max_whitespace: usize,
    /// JSON semantics.
    #[arg(long, value_enum, default_value = "strict")]
    pub json_mode: JsonModeArg,
    /// How deep recursive `$ref`s are unrolled.
    #[arg(long, default_value_t = 3)]
    pub max_depth: usize,
    /// Downgrade unsupported keywords to warnings on stderr (output may then not validate).
    #[arg(long)]
    pub lenient: bool,
    /// Compile a `oneOf` whose branches may overlap as `anyOf` (output may then not validate).
    #[arg(long)]
    pub coerce_one_of: bool,
}

impl SchemaArgs {
    pub fn options(&self) -> SchemaOptions {
        SchemaOptions {
            whitespace: match self.whitespace {
                WhitespaceArg::Compact => Whitespace::Compact,
                WhitespaceArg::Python => Whitespace::Python,
                WhitespaceArg::Flexible => Whitespace::Flexible {
                    max: self.max_whitespace,
                },
            },
            mode: match self.json_mode {
                JsonModeArg::Strict => JsonMode::Strict,
                JsonModeArg::Compliant => JsonMode::Compliant,
            },
            max_depth: self.max_depth,
            lenient: self.lenient,
            coerce_one_of: self.coerce_one_of,
            ..SchemaOptions::default()
        }
    }
}

//! The schema compiler's command-line options, shared by every subcommand
//! that takes a JSON Schema. `options()` turns them into
//! [`SchemaOptions`](constrain::schema::SchemaOptions).

use anyhow::Context;
use clap::{Args, ValueEnum};
use constrain::schema::{Documents, JsonMode, PropertyOrder, SchemaOptions, Whitespace};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WhitespaceArg {
    /// No whitespace: `{"a":1}`.
    Compact,
    /// `", "` and `": "`, as Python's json.dumps writes.
    Python,
    /// Any JSON whitespace, at most --whitespace-max bytes per slot.
    Flexible,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum JsonModeArg {
    /// Generation semantics: absent additionalProperties means no extra keys.
    Strict,
    /// JSON Schema's own semantics: extra keys allowed, any type where none is given.
    Compliant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PropertyOrderArg {
    /// The order of `properties`, extra keys after them.
    Schema,
    /// Any order, each key at most once, every required one present.
    Any,
}

/// Options for compiling a JSON Schema.
#[derive(Args, Clone, Debug)]
pub struct SchemaArgs {
    /// Whitespace between JSON tokens (default compact; flexible, at most
    /// 8 bytes per slot, for the JSON inside a structural tag).
    #[arg(long, value_enum)]
    pub whitespace: Option<WhitespaceArg>,
    /// Largest whitespace run per slot with --whitespace flexible.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub whitespace_max: usize,
    /// What an absent additionalProperties / type means.
    #[arg(long, value_enum, default_value = "strict")]
    pub json_mode: JsonModeArg,
    /// The order of an object's properties (compliant mode always takes
    /// any order).
    #[arg(long, value_enum, default_value = "schema")]
    pub property_order: PropertyOrderArg,
    /// Deepest recursive $ref nesting: the stack limit where recursion is exact
    /// (the pushdown engine; default 1024) and the unroll depth where it is not
    /// (recursive refs under not/oneOf/siblings, vocabularies without every
    /// single byte; default 3).
    #[arg(long, value_name = "N")]
    pub max_depth: Option<usize>,
    /// Downgrade unsupported keywords to warnings (output may then not validate).
    #[arg(long)]
    pub lenient: bool,
    /// Compile a oneOf whose branches may overlap as anyOf (output may then not validate).
    #[arg(long)]
    pub coerce_one_of: bool,
    /// Treat keywords no JSON Schema draft defines as annotations (with a warning).
    #[arg(long)]
    pub allow_unknown_keywords: bool,
    /// Every free-form value ("any JSON value": `{}`, `true`, implicit extra
    /// keys in compliant mode) a call of one shared fragment: exact at any
    /// depth instead of a few containers deep; first visits cost more.
    #[arg(long)]
    pub free_form_calls: bool,
    /// Register every `*.json` file in DIR as a schema document that `$ref`s
    /// may name: under its `$id`, or its `file://` URI when it has none
    /// (nothing is ever fetched; the JSON Schema meta-schemas are built in).
    #[arg(long, value_name = "DIR")]
    pub schema_dir: Option<std::path::PathBuf>,
}

/// The `file://` URI of a path (made absolute).
fn file_uri(path: &std::path::Path) -> anyhow::Result<String> {
    let abs = std::fs::canonicalize(path)
        .with_context(|| format!("cannot resolve {}", path.display()))?;
    Ok(format!("file://{}", abs.display()))
}

impl SchemaArgs {
    /// The documents `--schema-dir` registers (none without it).
    pub fn documents(&self) -> anyhow::Result<Documents> {
        let mut docs = Documents::new();
        let Some(dir) = &self.schema_dir else {
            return Ok(docs);
        };
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read --schema-dir {}", dir.display()))?;
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
            .collect();
        paths.sort();
        for p in paths {
            let doc = super::common::read_json(&p, "schema document")?;
            let has_id = doc.get("$id").is_some_and(serde_json::Value::is_string);
            let r = if has_id {
                docs.insert_by_id(doc).map(drop)
            } else {
                docs.insert(&file_uri(&p)?, doc)
            };
            r.with_context(|| format!("cannot register {}", p.display()))?;
        }
        Ok(docs)
    }

    /// The schema read from `path`, with the documents of `--schema-dir`
    /// it reaches bundled in. With `--schema-dir`, a schema without `$id`
    /// takes its file URI as its base, so that a relative `$ref`
    /// (`"address.json"`) names a file beside it.
    pub fn prepare(
        &self,
        mut schema: serde_json::Value,
        path: &std::path::Path,
    ) -> anyhow::Result<serde_json::Value> {
        if self.schema_dir.is_none() {
            return Ok(schema);
        }
        let docs = self.documents()?;
        if let serde_json::Value::Object(m) = &mut schema {
            if !m.contains_key("$id") {
                m.insert("$id".into(), file_uri(path)?.into());
            }
        }
        Ok(docs.bundle(&schema)?)
    }

    /// The options for a structural tag's embedded schemas: as
    /// [`Self::options`], but whitespace defaults to the tag's own default
    /// ([`constrain::tags::StructuralTag::schema_options`]).
    pub fn tag_options(&self) -> SchemaOptions {
        let mut o = self.options();
        if self.whitespace.is_none() {
            o.whitespace = constrain::tags::StructuralTag::schema_options().whitespace;
        }
        o
    }

    pub fn options(&self) -> SchemaOptions {
        SchemaOptions::default()
            .whitespace(match self.whitespace.unwrap_or(WhitespaceArg::Compact) {
                WhitespaceArg::Compact => Whitespace::Compact,
                WhitespaceArg::Python => Whitespace::Python,
                WhitespaceArg::Flexible => Whitespace::Flexible {
                    max: self.whitespace_max,
                },
            })
            .mode(match self.json_mode {
                JsonModeArg::Strict => JsonMode::Strict,
                JsonModeArg::Compliant => JsonMode::Compliant,
            })
            .max_depth(self.max_depth.unwrap_or(SchemaOptions::default().max_depth))
            .max_stack_depth(
                self.max_depth
                    .unwrap_or(SchemaOptions::default().max_stack_depth),
            )
            .property_order(match self.property_order {
                PropertyOrderArg::Schema => PropertyOrder::Schema,
                PropertyOrderArg::Any => PropertyOrder::Any,
            })
            .lenient(self.lenient)
            .coerce_one_of(self.coerce_one_of)
            .allow_unknown_keywords(self.allow_unknown_keywords)
            .free_form_calls(self.free_form_calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        s: SchemaArgs,
    }

    #[test]
    fn flags_map_to_options() {
        let t = T::parse_from([
            "t",
            "--whitespace",
            "flexible",
            "--whitespace-max",
            "3",
            "--json-mode",
            "compliant",
            "--max-depth",
            "5",
            "--lenient",
            "--coerce-one-of",
            "--free-form-calls",
            "--property-order",
            "any",
        ]);
        let o = t.s.options();
        assert_eq!(o.property_order, PropertyOrder::Any);
        assert_eq!(o.whitespace, Whitespace::Flexible { max: 3 });
        assert_eq!(o.mode, JsonMode::Compliant);
        assert_eq!((o.max_depth, o.max_stack_depth), (5, 5));
        assert!(o.lenient && o.coerce_one_of && !o.allow_unknown_keywords);
        assert!(o.free_form_calls);
        let d = T::parse_from(["t"]).s.options();
        assert_eq!(d.whitespace, Whitespace::Compact);
        assert_eq!(d.mode, JsonMode::Strict);
        assert_eq!(d.property_order, PropertyOrder::Schema);
        assert_eq!((d.max_depth, d.max_stack_depth), (3, 1024));
        // A structural tag's JSON takes flexible whitespace unless told.
        assert_eq!(
            T::parse_from(["t"]).s.tag_options().whitespace,
            Whitespace::Flexible { max: 8 }
        );
        let c = T::parse_from(["t", "--whitespace", "compact"]).s;
        assert_eq!(c.tag_options().whitespace, Whitespace::Compact);
    }
}

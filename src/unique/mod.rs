//! # `uniqueItems` checked at run time
//!
//! Arrays of distinct items are not a regular language, so the schema
//! compiler cannot write them into an automaton. Where a schema asks for
//! them, the automaton keeps the array without the check and the
//! [`crate::Matcher`] adds it. A [`UniqueItems`] beside the index is a graph
//! of the schema (one node per schema object; edges for object keys,
//! undeclared keys and items; "applies here too" for `allOf`, `$ref` and
//! lone array branches), built by `schema::unique_sites`, saying which
//! arrays must hold distinct items. Each matcher reads its own output with
//! a small JSON scanner (`Scan`, `scan.rs`) that knows which schema nodes
//! apply where it stands and keeps the items of every open checked array in
//! canonical form (`canon.rs`: strings decoded, numbers as exact decimals so
//! `1`, `1.0` and `10e-1` are one value, object keys sorted). The mask is
//! the index's mask less
//!
//! * a token whose bytes complete an item equal to an earlier one of the
//!   same array (two equal items inside one token too);
//! * a token that leaves an item only duplicates can finish (`"ab` under
//!   `maxLength: 2` once `"ab"` was written), or writes a comma where no new
//!   item is left (all eight strings of `^[a-h]$` written): where the schema
//!   lists the items' values, a lookup; elsewhere a depth-first search over
//!   the index's own byte steps (`run.rs`) for one completion that is new.
//!   Past [`LOOKAHEAD_NODES`] steps the token is refused (sound; it only
//!   narrows).
//!
//! Only tokens that may matter are tried. An item is at risk only while its
//! text can still become an earlier item (`partial.rs`); inside a string,
//! the tokens tried are those that go on as an earlier item's string does,
//! or hold a backslash, or a quote and a comma. Outside checked arrays, or
//! while nothing is at risk, the index's mask stands but for tokens holding
//! a comma (one may hold a whole item).

mod canon;
mod partial;
mod places;
mod run;
mod scan;

pub(crate) use canon::canonical;
pub use places::UniqueItems;
pub(crate) use run::UniqueRun;
pub use run::LOOKAHEAD_NODES;

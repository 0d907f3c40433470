//! # `uniqueItems` checked at run time
//!
//! Arrays of distinct strings or numbers are not a regular language, so the
//! schema compiler cannot write them into an automaton. Where a schema asks
//! for them, the automaton keeps the array without the check and the
//! [`crate::Matcher`] adds it: a [`UniqueItems`] beside the index says, as a
//! trie over instance paths (object keys and "any item"), which arrays must
//! hold distinct items, and each matcher reads its own output with a small
//! JSON scanner ([`Scan`]) that knows where it stands in that trie, keeps the
//! items of every open checked array in canonical form (strings decoded,
//! numbers as exact decimals so `1`, `1.0` and `10e-1` are one value, object
//! keys sorted), and
//!
//! * refuses a token whose bytes complete an item equal to an earlier one of
//!   the same array;
//! * refuses a token that leaves an item unfinished where every way to
//!   finish it is a duplicate (an item `"ab` with `maxLength: 2` when `"ab"`
//!   was written), or that writes a comma where no new item is left (eight
//!   one-letter strings of `^[a-h]$` written): a bounded search over the index's own byte steps, in
//!   order of the fewest bytes to acceptance, looks for one completion that
//!   is new. Past [`LOOKAHEAD_NODES`] steps the token is refused (sound; it
//!   only narrows).
//!
//! The mask is the index's mask with those tokens removed. Only tokens that
//! may matter are tried: inside a string item whose text so far starts no
//! earlier item, nothing is; inside one that does, the tokens starting with
//! the next byte of such an item, a backslash or a quote (the item can close
//! in the token); elsewhere in a checked array, every allowed token. Outside
//! checked arrays, or while no item was written, the index's mask stands as
//! it is. The schema compiler only hands an array to this check where the
//! path alone decides that the array is checked (see
//! `schema::unique_sites`).

mod canon;
mod partial;
mod places;
mod run;
mod scan;

pub(crate) use canon::canonical;
pub use places::UniqueItems;
pub(crate) use run::UniqueRun;
pub use run::LOOKAHEAD_NODES;

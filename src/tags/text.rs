//! Free text as regex text: the languages that `any_text`, triggers and
//! tag ends need, written by the exact boolean algebra
//! ([`crate::dfa::algebra::combine`]), each product built once per process
//! (every tag of a model format needs the same ones).
//!
//! * [`Texts::free`]: text holding none of a set of strings (XGrammar's
//!   `excludes` and the enclosing tag's end), optionally at most `n`
//!   characters — `.* ∖ .*(s₁|…|sₖ).*`.
//! * [`Texts::until`]: text up to and including the first completed
//!   trigger, which is `t` — free text followed by `t`, with no trigger
//!   completed before the end: `(free · t) ∖ .*(t₁|…|tₖ).+`. This is how a
//!   dispatch reads its input: the first trigger seen decides
//!   (XGrammar's `triggered_tags` rejects `aaab…` for the trigger `aa` and
//!   the tag `aab…`).

use super::TagError;
use crate::dfa::algebra::{combine, AlgebraError, Op};
use crate::schema::{Pointer, SchemaOptions};
use std::collections::HashMap;

/// The free-text languages, under the product limits of the schema options
/// (`max_product_states`, `max_product_len`).
pub(crate) struct Texts<'a> {
    opts: &'a SchemaOptions,
}

/// Any text (`.` with `s`: newlines too).
const ANY: &str = "(?s:.*)";

fn alternation(strings: &[String]) -> String {
    let parts: Vec<String> = strings.iter().map(|s| regex_syntax::escape(s)).collect();
    format!("(?:{})", parts.join("|"))
}

fn sorted(strings: &[String]) -> Vec<String> {
    let mut v = strings.to_vec();
    v.sort();
    v.dedup();
    v
}

impl<'a> Texts<'a> {
    pub fn new(opts: &'a SchemaOptions) -> Texts<'a> {
        Texts { opts }
    }

    fn combine(&self, a: &str, b: &str, op: Op, at: &Pointer) -> Result<Option<String>, TagError> {
        // The same free-text languages recur in every tag of a model format
        // (the same triggers and ends): built once per process, under the
        // limits they were built with.
        type Key = (String, String, bool, usize, usize);
        static BUILT: std::sync::OnceLock<std::sync::Mutex<HashMap<Key, Option<String>>>> =
            std::sync::OnceLock::new();
        const MOST: usize = 4096;
        let key: Key = (
            a.to_string(),
            b.to_string(),
            op == Op::And,
            self.opts.max_product_states,
            self.opts.max_product_len,
        );
        let built = BUILT.get_or_init(Default::default);
        if let Some(hit) = built.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(hit.clone());
        }
        let out = combine(
            a,
            b,
            op,
            self.opts.max_product_states,
            self.opts.max_product_len,
        )
        .map_err(|e| {
            let limit = match &e {
                AlgebraError::TooManyStates { .. } => "SchemaOptions::max_product_states",
                AlgebraError::TooLong { .. } => "SchemaOptions::max_product_len",
                AlgebraError::Dfa(_) => "the DFA limits",
            };
            TagError::TooBig {
                pointer: at.clone(),
                what: format!("the free text's automaton ({e})"),
                limit,
            }
        })?;
        let mut map = built.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MOST {
            map.clear();
        }
        map.insert(key, out.clone());
        Ok(out)
    }

    /// Text holding none of `stop`, of at most `max_chars` characters.
    pub fn free(
        &self,
        stop: &[String],
        max_chars: Option<u32>,
        at: &Pointer,
    ) -> Result<Option<String>, TagError> {
        let stop = sorted(stop);
        let bounded = max_chars.map(|n| format!("(?s:.{{0,{n}}})"));
        Ok(match (stop.is_empty(), &bounded) {
            (true, None) => Some(ANY.to_string()),
            (true, Some(b)) => Some(b.clone()),
            (false, _) => {
                let holding = format!("(?s:.*{}.*)", alternation(&stop));
                let base = bounded.as_deref().unwrap_or(ANY);
                self.combine(base, &holding, Op::AndNot, at)?
            }
        })
    }

    /// Text holding none of `stop`, ending with the first of `triggers`
    /// it completes, which is `t`.
    pub fn until(
        &self,
        stop: &[String],
        triggers: &[String],
        t: &str,
        at: &Pointer,
    ) -> Result<Option<String>, TagError> {
        let Some(free) = self.free(stop, None, at)? else {
            return Ok(None);
        };
        let ending = format!("(?:{free}){}", regex_syntax::escape(t));
        let earlier = format!("(?s:.*{}.+)", alternation(&sorted(triggers)));
        self.combine(&ending, &earlier, Op::AndNot, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(re: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{re})$")).unwrap()
    }

    #[test]
    fn free_text_holds_no_stop_string() {
        let opts = SchemaOptions::default();
        let t = Texts::new(&opts);
        let at = Pointer::root();
        let re = full(&t.free(&["ab".into()], None, &at).unwrap().unwrap());
        for (s, ok) in [
            ("", true),
            ("a", true),
            ("ba", true),
            ("ab", false),
            ("xaby", false),
            ("aa\nb", true),
        ] {
            assert_eq!(re.is_match(s), ok, "{s:?}");
        }
        let re = full(&t.free(&[], Some(2), &at).unwrap().unwrap());
        assert!(re.is_match("é\n") && !re.is_match("abc"));
    }

    #[test]
    fn until_stops_at_the_first_trigger() {
        let opts = SchemaOptions::default();
        let t = Texts::new(&opts);
        let at = Pointer::root();
        let re = full(&t.until(&[], &["aa".into()], "aa", &at).unwrap().unwrap());
        assert!(re.is_match("aa") && re.is_match("xaa") && re.is_match("abaa"));
        // `aaa` completes the trigger at its second byte.
        assert!(!re.is_match("aaa"));
        let re = full(
            &t.until(&["zz".into()], &["<f=".into(), "<g>".into()], "<f=", &at)
                .unwrap()
                .unwrap(),
        );
        assert!(re.is_match("hi <f=") && !re.is_match("<g> <f=") && !re.is_match("zz<f="));
    }
}

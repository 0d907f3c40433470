//! # Beam search on a toy tree, for the `constrain beam` explainer
//!
//! Greedy decoding takes the likeliest *token* at every step; beam search looks
//! for the likeliest *sequence*. This module runs both on a small, fully
//! written-out tree of next-token probabilities, so a person (or a test) can
//! see where they differ:
//!
//! ```json
//! {"A": {"p": 0.40, "next": {"x": {"p": 0.50}, "y": {"p": 0.30}}},
//!  "B": {"p": 0.35, "next": {"x": {"p": 0.90}, "y": {"p": 0.10}}}}
//! ```
//!
//! Each key is a token, `p` its probability given the path above it, `next`
//! the tokens that may follow; a node without `next` (or with an empty one)
//! ends the sequence, like EOS. Greedy takes A (.40), then x (.50): .20 in
//! all. A beam of width 2 also keeps B (.35), whose continuation x (.90) gives
//! .315: the better sequence, which greedy never looked at.
//!
//! ## The algorithm (the one the generation loop runs)
//!
//! A hypothesis is scored by its summed log-probability divided by
//! `length^A`, the length penalty of Hugging Face (`A = 1` by default: the mean
//! log-probability per token; `A = 0`: the plain sum, which favours short
//! sequences; larger `A` favours long ones). Each step extends every live
//! hypothesis by each of its next tokens, ranks all those extensions by score
//! and keeps the `N` best; a kept extension that ends the sequence is
//! *complete* and leaves the beam. The search stops when nothing is live. The
//! answer is the best-scoring complete hypothesis, **greedy's completion
//! included**: textbook beam search can prune the greedy path and end up worse
//! than it, so greedy's result is always a candidate and beam search never
//! returns a sequence that scores worse than greedy's. With `N = 1` the search
//! is greedy.
//!
//! Ties are broken by the order of the keys in the file (first wins), so the
//! result is deterministic.

use serde_json::Value;

/// Why a tree was refused; each names where, as a JSON Pointer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TreeError {
    /// A level of the tree, or a token, that is not a JSON object.
    #[error("the tree must be a JSON object of tokens, e.g. {{\"A\": {{\"p\": 0.4}}}}; found {found} at {pointer:?}")]
    NotAnObject {
        /// JSON Pointer into the tree (`""`: the whole document).
        pointer: String,
        /// The kind of JSON value found instead (`an array`, `null`, ...).
        found: String,
    },
    /// A level with no tokens.
    #[error("the tree at {pointer:?} has no tokens (an empty object); leave out \"next\" to end a sequence")]
    Empty {
        /// JSON Pointer into the tree (`""`: the whole document).
        pointer: String,
    },
    /// A token without its probability `p`.
    #[error("token at {pointer:?} has no \"p\" (its probability, a number in (0, 1])")]
    MissingP {
        /// JSON Pointer into the tree (`""`: the whole document).
        pointer: String,
    },
    /// A `p` that is not a number in (0, 1].
    #[error("invalid probability at {pointer:?}: {value}; expected a number in (0, 1]")]
    BadP {
        /// JSON Pointer into the tree (`""`: the whole document).
        pointer: String,
        /// The value found, as text.
        value: String,
    },
    /// Sibling tokens whose probabilities add up to more than 1.
    #[error("the probabilities at {pointer:?} sum to {sum}, more than 1")]
    SumAboveOne {
        /// JSON Pointer into the tree (`""`: the whole document).
        pointer: String,
        /// Their sum.
        sum: f64,
    },
    /// A token with a key other than `p` and `next`.
    #[error("unknown key {key:?} at {pointer:?}: a token has only \"p\" and \"next\"")]
    UnknownKey {
        /// JSON Pointer into the tree (`""`: the whole document).
        pointer: String,
        /// The unknown key.
        key: String,
    },
    /// A beam width of 0.
    #[error("invalid beam width 0: the beam width must be at least 1")]
    ZeroBeam,
    /// A length penalty that is not finite (the value given).
    #[error("invalid length penalty {0}: must be a finite number")]
    BadLengthPenalty(f64),
}

/// One token of the tree: its probability given its parent path, and what may
/// follow (empty: the sequence ends here).
#[derive(Clone, Debug, PartialEq)]
pub struct TreeNode {
    /// The token, as written in the tree.
    pub token: String,
    /// Its probability given the path above it, in (0, 1].
    pub p: f64,
    /// The tokens that may follow, in file order (empty: the sequence ends).
    pub next: Vec<TreeNode>,
}

/// A toy tree of next-token probabilities (the roots are the first tokens).
#[derive(Clone, Debug, PartialEq)]
pub struct BeamTree {
    /// The first tokens, in file order.
    pub roots: Vec<TreeNode>,
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn level(v: &Value, pointer: &str) -> Result<Vec<TreeNode>, TreeError> {
    let Value::Object(map) = v else {
        return Err(TreeError::NotAnObject {
            pointer: pointer.to_string(),
            found: kind(v).to_string(),
        });
    };
    if map.is_empty() {
        return Err(TreeError::Empty {
            pointer: pointer.to_string(),
        });
    }
    let mut out = Vec::with_capacity(map.len());
    let mut sum = 0.0;
    for (token, node) in map {
        let here = format!("{pointer}/{}", escape_pointer(token));
        let Value::Object(fields) = node else {
            return Err(TreeError::NotAnObject {
                pointer: here,
                found: kind(node).to_string(),
            });
        };
        if let Some(k) = fields.keys().find(|k| *k != "p" && *k != "next") {
            return Err(TreeError::UnknownKey {
                pointer: here,
                key: k.clone(),
            });
        }
        let p_ptr = format!("{here}/p");
        let p = match fields.get("p") {
            None => return Err(TreeError::MissingP { pointer: here }),
            Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(other) => {
                return Err(TreeError::BadP {
                    pointer: p_ptr,
                    value: other.to_string(),
                })
            }
        };
        if !(p > 0.0 && p <= 1.0) {
            return Err(TreeError::BadP {
                pointer: p_ptr,
                value: p.to_string(),
            });
        }
        sum += p;
        let next = match fields.get("next") {
            None => Vec::new(),
            Some(Value::Object(m)) if m.is_empty() => Vec::new(),
            Some(n) => level(n, &format!("{here}/next"))?,
        };
        out.push(TreeNode {
            token: token.clone(),
            p,
            next,
        });
    }
    // A little slack for decimal rounding (0.1 + 0.2 + 0.7).
    if sum > 1.0 + 1e-9 {
        return Err(TreeError::SumAboveOne {
            pointer: pointer.to_string(),
            sum,
        });
    }
    Ok(out)
}

impl BeamTree {
    /// Reads a tree from its JSON form (see the module docs). Errors name the
    /// offending place as a JSON Pointer (`""` is the whole document).
    pub fn from_json(v: &Value) -> Result<BeamTree, TreeError> {
        Ok(BeamTree {
            roots: level(v, "")?,
        })
    }
}

/// A path through the tree with its probability and score.
#[derive(Clone, Debug, PartialEq)]
pub struct Hypothesis {
    /// The tokens of the path, from the root.
    pub tokens: Vec<String>,
    /// Product of the probabilities along the path.
    pub prob: f64,
    /// Sum of their natural logs.
    pub logprob: f64,
    /// `logprob / len^A`.
    pub score: f64,
    /// The path ends the sequence (a leaf).
    pub complete: bool,
}

/// Summed log-probability divided by `len^A` (Hugging Face's
/// `length_penalty`); the empty sequence scores its logprob.
pub fn length_normalised(logprob: f64, len: usize, length_penalty: f64) -> f64 {
    if len == 0 {
        return logprob;
    }
    logprob / (len as f64).powf(length_penalty)
}

/// What one beam step did: every extension considered, and whether it was
/// kept (and complete) or pruned.
#[derive(Clone, Debug, PartialEq)]
pub struct BeamStep {
    /// Extensions in rank order (best score first).
    pub candidates: Vec<(Hypothesis, bool)>,
}

/// The outcome of [`beam_search_tree`].
#[derive(Clone, Debug, PartialEq)]
pub struct BeamOutcome {
    /// Greedy's path (likeliest token at every step), scored like the beam.
    pub greedy: Hypothesis,
    /// The best complete hypothesis, greedy's included.
    pub beam: Hypothesis,
    /// Whether `beam` is greedy's completion because textbook beam search
    /// pruned it and found only worse ones.
    pub kept_greedy: bool,
    /// The steps, for the explainer.
    pub steps: Vec<BeamStep>,
}

fn extend(h: &Hypothesis, n: &TreeNode, a: f64) -> Hypothesis {
    let mut tokens = h.tokens.clone();
    tokens.push(n.token.clone());
    let logprob = h.logprob + n.p.ln();
    Hypothesis {
        score: length_normalised(logprob, tokens.len(), a),
        prob: h.prob * n.p,
        logprob,
        tokens,
        complete: n.next.is_empty(),
    }
}

fn empty() -> Hypothesis {
    Hypothesis {
        tokens: Vec::new(),
        prob: 1.0,
        logprob: 0.0,
        score: 0.0,
        complete: false,
    }
}

/// Greedy then beam search of width `beam` over `tree` (see the module docs).
///
/// ```
/// use constrain::sampling::{beam_search_tree, BeamTree};
/// let tree = BeamTree::from_json(&serde_json::json!({
///     "A": {"p": 0.40, "next": {"x": {"p": 0.50}, "y": {"p": 0.30}}},
///     "B": {"p": 0.35, "next": {"x": {"p": 0.90}, "y": {"p": 0.10}}}
/// }))?;
/// let out = beam_search_tree(&tree, 2, 1.0)?;
/// assert_eq!(out.greedy.tokens, ["A", "x"]);
/// assert!((out.greedy.prob - 0.20).abs() < 1e-12);
/// assert_eq!(out.beam.tokens, ["B", "x"]);
/// assert!((out.beam.prob - 0.315).abs() < 1e-12);
/// # Ok::<(), constrain::sampling::TreeError>(())
/// ```
pub fn beam_search_tree(
    tree: &BeamTree,
    beam: usize,
    length_penalty: f64,
) -> Result<BeamOutcome, TreeError> {
    if beam == 0 {
        return Err(TreeError::ZeroBeam);
    }
    if !length_penalty.is_finite() {
        return Err(TreeError::BadLengthPenalty(length_penalty));
    }
    // Greedy: the likeliest next token until a leaf (first key wins ties).
    let mut greedy = empty();
    let mut level = &tree.roots;
    while let Some(best) = level.iter().fold(None::<&TreeNode>, |b, n| match b {
        Some(b) if b.p >= n.p => Some(b),
        _ => Some(n),
    }) {
        greedy = extend(&greedy, best, length_penalty);
        level = &best.next;
    }

    // Beam: live hypotheses with the node they stand on.
    let mut live: Vec<(Hypothesis, &[TreeNode])> = vec![(empty(), &tree.roots)];
    let mut complete: Vec<Hypothesis> = Vec::new();
    let mut steps = Vec::new();
    while !live.is_empty() {
        let mut ext: Vec<(Hypothesis, &[TreeNode])> = Vec::new();
        for (h, next) in &live {
            for n in next.iter() {
                ext.push((extend(h, n, length_penalty), &n.next));
            }
        }
        // Stable: equal scores keep file order.
        ext.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
        let mut step = BeamStep {
            candidates: Vec::with_capacity(ext.len()),
        };
        live = Vec::new();
        for (rank, (h, next)) in ext.into_iter().enumerate() {
            let kept = rank < beam;
            step.candidates.push((h.clone(), kept));
            if !kept {
                continue;
            }
            if h.complete {
                complete.push(h);
            } else {
                live.push((h, next));
            }
        }
        steps.push(step);
    }
    let best = complete
        .into_iter()
        .fold(None::<Hypothesis>, |b, h| match b {
            Some(b) if b.score >= h.score => Some(b),
            _ => Some(h),
        })
        .expect("a non-empty tree has a complete path kept at its last step");
    let kept_greedy = greedy.score > best.score;
    let beam = if kept_greedy { greedy.clone() } else { best };
    Ok(BeamOutcome {
        greedy,
        beam,
        kept_greedy,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn classic() -> BeamTree {
        BeamTree::from_json(&json!({
            "A": {"p": 0.40, "next": {"x": {"p": 0.50}, "y": {"p": 0.30}, "z": {"p": 0.20}}},
            "B": {"p": 0.35, "next": {"x": {"p": 0.90}, "y": {"p": 0.10}}},
            "C": {"p": 0.25, "next": {"x": {"p": 0.60}, "y": {"p": 0.40}}}
        }))
        .unwrap()
    }

    #[test]
    fn classic_worked_example() {
        let out = beam_search_tree(&classic(), 2, 1.0).unwrap();
        assert_eq!(out.greedy.tokens, ["A", "x"]);
        assert!((out.greedy.prob - 0.20).abs() < 1e-12);
        assert!((out.greedy.logprob - 0.20f64.ln()).abs() < 1e-12);
        assert_eq!(out.beam.tokens, ["B", "x"]);
        assert!((out.beam.prob - 0.315).abs() < 1e-12);
        assert!((out.beam.score - 0.315f64.ln() / 2.0).abs() < 1e-12);
        assert!(!out.kept_greedy);
        // Step 1 keeps A and B, prunes C.
        let kept: Vec<_> = out.steps[0]
            .candidates
            .iter()
            .map(|(h, k)| (h.tokens.join(""), *k))
            .collect();
        assert_eq!(
            kept,
            [("A".into(), true), ("B".into(), true), ("C".into(), false)]
        );
    }

    #[test]
    fn width_one_is_greedy() {
        let out = beam_search_tree(&classic(), 1, 1.0).unwrap();
        assert_eq!(out.beam, out.greedy);
    }

    /// Exhaustive: with a width at least the number of paths, beam search is
    /// the best path by score.
    #[test]
    fn wide_beam_is_exhaustive() {
        let out = beam_search_tree(&classic(), 100, 1.0).unwrap();
        assert_eq!(out.beam.tokens, ["B", "x"]);
    }

    /// Textbook beam search loses here. Width 2 keeps A and B; at step 2
    /// both of B's extensions (.35 × .5 = .175) outrank greedy's A a
    /// (.4 × .34 = .136), which is pruned although it is complete; B's
    /// continuations then end poorly (.0175). Greedy's completion is kept.
    #[test]
    fn never_worse_than_greedy() {
        let t = BeamTree::from_json(&json!({
            "A": {"p": 0.40, "next": {"a": {"p": 0.34}, "b": {"p": 0.33}, "c": {"p": 0.33}}},
            "B": {"p": 0.35, "next": {
                "d": {"p": 0.5, "next": {"e": {"p": 0.1}, "f": {"p": 0.1}}},
                "g": {"p": 0.5, "next": {"e": {"p": 0.1}, "f": {"p": 0.1}}}}},
            "C": {"p": 0.25}
        }))
        .unwrap();
        let out = beam_search_tree(&t, 2, 1.0).unwrap();
        assert_eq!(out.greedy.tokens, ["A", "a"]);
        let pruned = out.steps[1]
            .candidates
            .iter()
            .find(|(h, _)| h.tokens == ["A", "a"])
            .unwrap();
        assert!(!pruned.1, "greedy's path is pruned at step 2");
        assert!(out.kept_greedy);
        assert_eq!(out.beam, out.greedy);
        // Wider, the search sees A a itself.
        let out = beam_search_tree(&t, 3, 1.0).unwrap();
        assert!(!out.kept_greedy);
        assert_eq!(out.beam.tokens, ["A", "a"]);
    }

    #[test]
    fn length_penalty_changes_the_winner() {
        // Short B (.5) against long A y z (.5 · .95 · .95 = .451):
        // plain sum (A = 0) prefers B, per-token mean (A = 1) prefers A y z.
        let t = BeamTree::from_json(&json!({
            "A": {"p": 0.5, "next": {"y": {"p": 0.95, "next": {"z": {"p": 0.95}}}}},
            "B": {"p": 0.5}
        }))
        .unwrap();
        let sum = beam_search_tree(&t, 2, 0.0).unwrap();
        assert_eq!(sum.beam.tokens, ["B"]);
        let mean = beam_search_tree(&t, 2, 1.0).unwrap();
        assert_eq!(mean.beam.tokens, ["A", "y", "z"]);
    }

    #[test]
    fn bad_trees_name_the_place() {
        let e =
            BeamTree::from_json(&json!({"A": {"p": 0.4, "next": {"x": {"p": 1.5}}}})).unwrap_err();
        assert_eq!(
            e,
            TreeError::BadP {
                pointer: "/A/next/x/p".into(),
                value: "1.5".into()
            }
        );
        assert!(matches!(
            BeamTree::from_json(&json!({"A": {"q": 1}})).unwrap_err(),
            TreeError::UnknownKey { .. }
        ));
        assert!(matches!(
            BeamTree::from_json(&json!({"A": {}})).unwrap_err(),
            TreeError::MissingP { .. }
        ));
        assert!(matches!(
            BeamTree::from_json(&json!([1])).unwrap_err(),
            TreeError::NotAnObject { .. }
        ));
        assert!(matches!(
            BeamTree::from_json(&json!({"A": {"p": 0.7}, "B": {"p": 0.7}})).unwrap_err(),
            TreeError::SumAboveOne { .. }
        ));
        assert_eq!(
            beam_search_tree(&classic(), 0, 1.0).unwrap_err(),
            TreeError::ZeroBeam
        );
    }
}

//! # GBNF fragments → pushdown automaton
//!
//! A grammar whose recursion is left after the rewrite of immediate left
//! and right recursion is split into fragments ([`lower::fragments`]:
//! syntax trees with call markers); here they go through [`Pda::build`],
//! the same build as a JSON Schema's fragments, and its refusals are worded
//! in the grammar's terms: the return stack holds at most
//! [`GbnfOptions::max_stack_depth`] frames, and a grammar whose every text
//! nests deeper, or that derives no text within it, is a [`GbnfError`].
//!
//! [`lower::fragments`]: super::lower::fragments

use super::{GbnfError, GbnfOptions};
use crate::dfa::{DfaConfig, DfaError};
use crate::pda::{Body, BuildError, Fragments, Limits, Pda};

/// Why a grammar's fragments became no pushdown automaton.
#[derive(Debug)]
pub(crate) enum PushdownError {
    /// Refused in the grammar's terms (an empty language, a stack too deep).
    Gbnf(GbnfError),
    /// A fragment's automaton could not be built.
    Dfa(DfaError),
}

/// Determinizes each fragment and reads its call edges back out.
pub(crate) fn build(
    fragments: &Fragments,
    opts: &GbnfOptions,
    size: usize,
    config: &DfaConfig,
) -> Result<Pda, PushdownError> {
    let limits = Limits {
        max_stack_depth: opts.max_stack_depth,
        max_stacks: opts.max_stacks,
        depth_knob: format!("GbnfOptions::max_stack_depth ({})", opts.max_stack_depth),
    };
    let bodies: Vec<Option<Body>> = fragments
        .bodies
        .iter()
        .map(|b| b.as_ref().map(Body::Hir))
        .collect();
    Pda::build(&fragments.names, &bodies, &limits, size, config, None, &[]).map_err(|e| match e {
        BuildError::Empty => PushdownError::Gbnf(GbnfError::EmptyLanguage {
            max_depth: opts.max_stack_depth,
        }),
        BuildError::Depth { need } => PushdownError::Gbnf(GbnfError::StackDepth {
            limit: opts.max_stack_depth,
            need,
        }),
        BuildError::Dfa(e) => PushdownError::Dfa(e),
        // (Never: a grammar builds no lazy document.)
        BuildError::NotLazy => PushdownError::Gbnf(GbnfError::EmptyLanguage {
            max_depth: opts.max_stack_depth,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::gbnf::{lower, Gbnf};
    use crate::pda::INF;

    /// The fewest bytes to finish each state of each fragment with `room`
    /// frames above it, for every room up to the limit, by plain fixpoint
    /// iteration (Bellman-Ford) over every text and call edge, level by
    /// level: the reference the pushdown build's distances are checked
    /// against.
    fn naive_levels(pda: &Pda) -> Vec<Vec<Vec<u32>>> {
        let mut levels: Vec<Vec<Vec<u32>>> = Vec::new();
        for level in 0..=pda.max_stack_depth {
            let mut d: Vec<Vec<u32>> = pda
                .frags
                .iter()
                .map(|f| {
                    (0..f.states())
                        .map(|s| if s > 0 && f.accepting[s] { 0 } else { INF })
                        .collect()
                })
                .collect();
            loop {
                let mut changed = false;
                for (fi, f) in pda.frags.iter().enumerate() {
                    for s in 1..f.states() as u32 {
                        let mut best = d[fi][s as usize];
                        for b in 0..0xF5u8 {
                            let t = f.next_eager(s, b);
                            if t != 0 && d[fi][t as usize] != INF {
                                best = best.min(d[fi][t as usize] + 1);
                            }
                        }
                        if level > 0 {
                            for &(g, r) in &f.calls[s as usize] {
                                let c = &pda.frags[g as usize];
                                let cost = levels[level as usize - 1][g as usize][c.start as usize];
                                if cost != INF && d[fi][r as usize] != INF {
                                    best = best.min(cost + d[fi][r as usize]);
                                }
                            }
                        }
                        if best < d[fi][s as usize] {
                            d[fi][s as usize] = best;
                            changed = true;
                        }
                    }
                }
                if !changed {
                    break;
                }
            }
            levels.push(d);
        }
        levels
    }

    #[test]
    fn room_distances_agree_with_a_naive_fixpoint() {
        let grammars = [
            // The shortest way out of `a` needs a frame more than the long one.
            "root ::= a\na ::= \"(\" a \")\" | \"<\" c \">\" | \"longlonglongx\"\nc ::= \"{\" c \"}\" | \"y\"\n",
            "root ::= p\np ::= \"(\" p \")\" p | \"\"\n",
            // Mutual recursion, several calls in one body.
            "root ::= x\nx ::= \"a\" y y | \"b\"\ny ::= \"[\" x (\",\" x)* \"]\" | \"cc\" x\n",
            // A JSON-like value.
            "root ::= v\nv ::= \"{\" (s \":\" v (\",\" s \":\" v)*)? \"}\" | \"[\" (v (\",\" v)*)? \"]\" | s | [0-9]+\ns ::= \"\\\"\" [a-z]* \"\\\"\"\n",
            // A base case only through a deep call chain.
            "root ::= a\na ::= \"1\" b | \"1\" a \"1\"\nb ::= \"2\" c | \"2\" b\nc ::= \"3\" | \"3\" c\n",
        ];
        for text in grammars {
            let g = Gbnf::parse("t", text).unwrap();
            for depth in [1usize, 2, 3, 4, 6, 9] {
                let opts = GbnfOptions {
                    max_stack_depth: depth,
                    ..Default::default()
                };
                let Some(frags) = lower::fragments(&g, &opts).unwrap() else {
                    panic!("{text:?} has recursion");
                };
                let pda = match build(&frags, &opts, text.len(), &DfaConfig::default()) {
                    Ok(p) => p,
                    // Too shallow for any text: refused, nothing to compare.
                    Err(_) => continue,
                };
                let levels = naive_levels(&pda);
                for (fi, f) in pda.frags.iter().enumerate() {
                    for s in 1..f.states() as u32 {
                        for room in 0..=pda.max_stack_depth {
                            assert_eq!(
                                f.dist_within(s, room),
                                levels[room as usize][fi][s as usize],
                                "{text:?} depth {depth}: fragment {fi} state {s} room {room}"
                            );
                        }
                        let last = &levels[pda.max_stack_depth as usize][fi];
                        assert_eq!(f.dist[s as usize], last[s as usize]);
                    }
                }
            }
        }
    }
}

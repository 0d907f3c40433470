//! The decode loop narrows the output head to the union of its callers'
//! masks (`LanguageModel::forward_masked` through `BatchedSeq`): each
//! caller's wanted logits are bitwise those of the model alone, a caller
//! that reads every logit gets them all, whatever else shares the pass. On
//! the real Qwen2.5-Coder-0.5B (its head is `Q8_0`); skipped with a message
//! when the file is absent.

use constrain::TokenId;
use constrain_model::{LanguageModel, QwenModel};
use constrain_server::batch::{BatchConfig, Batcher, QwenBatch};
use std::path::PathBuf;
use std::sync::{Arc, Barrier};

fn model_path() -> Option<PathBuf> {
    let home = match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => PathBuf::from(h),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/constrain"),
    };
    let path = home.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    path.exists().then_some(path)
}

fn ids(v: &[u32]) -> Vec<TokenId> {
    v.iter().map(|&i| TokenId(i)).collect()
}

fn mask(width: usize, wanted: &[usize]) -> Vec<u64> {
    let mut w = vec![0u64; width.div_ceil(64)];
    for &i in wanted {
        w[i / 64] |= 1 << (i % 64);
    }
    w
}

/// Every wanted logit bitwise the reference's; the others the reference's
/// or `-inf`. Returns how many were left at `-inf`.
fn check(got: &[f32], want: &[f32], wanted: &[u64], what: &str) -> usize {
    assert_eq!(got.len(), want.len(), "{what}");
    let mut skipped = 0;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let read = (wanted[i / 64] >> (i % 64)) & 1 == 1;
        if !read && *g == f32::NEG_INFINITY {
            skipped += 1;
        } else {
            assert_eq!(g.to_bits(), w.to_bits(), "{what}: logit {i}");
        }
    }
    skipped
}

#[test]
fn the_loop_narrows_the_head_to_its_callers_masks() {
    let Some(path) = model_path() else {
        eprintln!(
            "skipping: the 0.5B GGUF is not in ~/.cache/constrain (run scripts/fetch-assets)"
        );
        return;
    };
    let model = QwenModel::load(&path).unwrap();
    let width = model.logits_width();
    let prompts = [
        ids(&[785, 6722, 315, 9625, 374]),
        ids(&[40, 1079, 264, 1273]),
    ];
    let want: Vec<Vec<f32>> = prompts
        .iter()
        .map(|p| {
            let mut m = QwenModel::from_weights(model.weights().clone());
            m.forward(p, 0).unwrap()
        })
        .collect();
    let masks = [
        mask(width, &[0, 11, 12095, width - 1]),
        mask(width, &[13, 6722]),
    ];
    let batcher = Batcher::start_with(
        QwenBatch(model.weights().clone()),
        BatchConfig::default().prefix_cache_bytes(0),
    );

    // Alone: the pass computes the mask's tiles only (a mask that comes
    // after the head is reached gets the whole head: tried a few times, for
    // a loaded machine).
    let mut h = batcher.handle().unwrap();
    let mut most = 0;
    for _ in 0..5 {
        let got = h
            .forward_masked(&prompts[0], 0, &mut || Some(masks[0].clone()))
            .unwrap();
        h.reset();
        most = most.max(check(&got, &want[0], &masks[0], "alone"));
        if most > width / 2 {
            break;
        }
    }
    assert!(most > width / 2, "alone: only {most} logits left out");

    // Together, one caller masked and one reading everything, then two
    // masked callers: whatever shares a pass, each gets what it reads.
    for both_masked in [false, true] {
        let start = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|k| {
                let mut h = batcher.handle().unwrap();
                let (start, prompt, mask) = (start.clone(), prompts[k].clone(), masks[k].clone());
                std::thread::spawn(move || {
                    start.wait();
                    let got = if k == 0 || both_masked {
                        h.forward_masked(&prompt, 0, &mut || Some(mask.clone()))
                    } else {
                        h.forward(&prompt, 0)
                    };
                    h.reset();
                    got.unwrap()
                })
            })
            .collect();
        let got: Vec<Vec<f32>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let what = format!("together, both masked {both_masked}");
        check(&got[0], &want[0], &masks[0], &what);
        if both_masked {
            check(&got[1], &want[1], &masks[1], &what);
        } else {
            let all = vec![u64::MAX; masks[1].len()];
            assert_eq!(check(&got[1], &want[1], &all, &what), 0, "{what}");
        }
    }
}

//! A row's logits do not depend on the rest of the pass, bitwise (`==`,
//! not approximately): `forward_all` over N tokens equals N one-token
//! `forward` calls, a batched step equals each sequence's own step, and one
//! pass over chunks of different lengths equals each chunk alone. This is
//! what makes speculative greedy decoding give exactly the target model's
//! text, and a batched server give each request what it would get alone.
//! `forward_masked` gives each wanted logit as `forward` does.
//!
//! Checked on tiny random GGUF files (F32 as written by the testkit, and the
//! same networks re-quantized to each GGUF type of the Qwen2.5-Coder Q4_K_M
//! files: Q5_0, Q8_0, Q4_K, Q6_K) and on the real Qwen2.5-Coder-0.5B
//! (skipped with a message when absent).

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;
use constrain::vocab::TokenId;
use constrain_model::{LanguageModel, QwenModel};
use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("constrain-net-exact-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn ids(v: &[u32]) -> Vec<TokenId> {
    v.iter().map(|&i| TokenId(i)).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Which type each weight gets.
type Plan = fn(&str) -> GgmlDType;

/// A tiny network (hidden 256, so that the 256-value K-quant blocks fit),
/// its 2-D weights re-quantized by `plan`.
fn tiny(arch: &str, tag: &str, plan: Option<Plan>) -> PathBuf {
    let f32_path = tmp(&format!("{arch}-f32.gguf"));
    let spec = TinySpec {
        arch: arch.into(),
        hidden: 256,
        heads: 4,
        kv_heads: 2,
        ffn: 512,
        ..TinySpec::default()
    };
    write_tiny_gguf(&f32_path, &spec).unwrap();
    let Some(plan) = plan else { return f32_path };
    let mut f = std::fs::File::open(&f32_path).unwrap();
    let content = gguf_file::Content::read(&mut f).unwrap();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for name in names {
        let t = content.tensor(&mut f, name, &Device::Cpu).unwrap();
        let t = if t.shape().dims().len() == 2 {
            let x = t.dequantize(&Device::Cpu).unwrap();
            QTensor::quantize(&x, plan(name)).unwrap()
        } else {
            t
        };
        tensors.push((name.clone(), t));
    }
    let md: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let path = tmp(&format!("{arch}-{tag}.gguf"));
    let mut out = std::fs::File::create(&path).unwrap();
    gguf_file::write(&mut out, &md, &ts).unwrap();
    path
}

/// The mix of the Qwen2.5-Coder-0.5B Q4_K_M file, spread over the layers.
fn mixed(name: &str) -> GgmlDType {
    let l0 = name.starts_with("blk.0.");
    match name.rsplit('.').nth(1).unwrap_or("") {
        "attn_q" | "attn_output" | "ffn_gate" | "ffn_up" => GgmlDType::Q5_0,
        "attn_k" => GgmlDType::Q5_0,
        "attn_v" if l0 => GgmlDType::Q8_0,
        "attn_v" => GgmlDType::Q5_0,
        "ffn_down" if l0 => GgmlDType::Q6K,
        "ffn_down" => GgmlDType::Q4K,
        _ => GgmlDType::Q8_0, // token_embd: the output head
    }
}

/// The 1.5B's types: K-quants throughout.
fn kquants(name: &str) -> GgmlDType {
    match name.rsplit('.').nth(1).unwrap_or("") {
        "ffn_down" | "attn_v" | "token_embd" => GgmlDType::Q6K,
        _ => GgmlDType::Q4K,
    }
}

fn forward_all_equals_steps(m: &mut QwenModel, prompt: &[TokenId], more: &[TokenId], what: &str) {
    m.reset();
    m.forward(prompt, 0).unwrap();
    let rows = m.forward_all(more, prompt.len()).unwrap();
    assert_eq!(rows.len(), more.len());
    m.reset();
    m.forward(prompt, 0).unwrap();
    for (i, t) in more.iter().enumerate() {
        let one = m
            .forward(std::slice::from_ref(t), prompt.len() + i)
            .unwrap();
        assert!(
            bits(&rows[i]) == bits(&one),
            "{what}: row {i} of forward_all differs from a single step"
        );
    }
}

fn step_batch_equals_steps(m: &QwenModel, prompts: &[Vec<TokenId>], next: &[TokenId], what: &str) {
    let mut seqs: Vec<QwenModel> = prompts
        .iter()
        .map(|p| {
            let mut s = QwenModel::from_weights(m.weights().clone());
            s.forward(p, 0).unwrap();
            s
        })
        .collect();
    let mut alone: Vec<QwenModel> = seqs.iter().map(QwenModel::fork).collect();
    let mut refs: Vec<&mut QwenModel> = seqs.iter_mut().collect();
    let batched = QwenModel::step_batch(&mut refs, next).unwrap();
    for (i, a) in alone.iter_mut().enumerate() {
        let one = a.forward(&next[i..=i], prompts[i].len()).unwrap();
        assert!(
            bits(&batched[i]) == bits(&one),
            "{what}: sequence {i} of the batch differs from its own step"
        );
    }
    // The caches the batch wrote are the same too.
    for (i, (s, a)) in seqs.iter_mut().zip(&mut alone).enumerate() {
        let x = s.forward(&ids(&[42]), prompts[i].len() + 1).unwrap();
        let y = a.forward(&ids(&[42]), prompts[i].len() + 1).unwrap();
        assert!(
            bits(&x) == bits(&y),
            "{what}: the step after the batch, seq {i}"
        );
    }
}

fn mixed_chunks_equal_alone(m: &QwenModel, what: &str) {
    let w = m.weights().clone();
    let (mut a, mut b, mut c) = (
        QwenModel::from_weights(w.clone()),
        QwenModel::from_weights(w.clone()),
        QwenModel::from_weights(w),
    );
    a.forward(&ids(&[1, 2, 3]), 0).unwrap();
    b.forward(&ids(&[4, 5]), 0).unwrap();
    let (mut a2, mut b2, mut c2) = (a.fork(), b.fork(), c.fork());
    let chunks = [ids(&[6]), ids(&[7, 8, 9]), ids(&[10, 11, 12, 13])];
    let refs: Vec<&[TokenId]> = chunks.iter().map(Vec::as_slice).collect();
    let rows = QwenModel::forward_batch(&mut [&mut a, &mut b, &mut c], &refs).unwrap();
    let alone = [
        a2.forward(&chunks[0], 3).unwrap(),
        b2.forward(&chunks[1], 2).unwrap(),
        c2.forward(&chunks[2], 0).unwrap(),
    ];
    for (i, (x, y)) in rows.iter().zip(&alone).enumerate() {
        assert!(bits(x) == bits(y), "{what}: chunk {i} of a mixed pass");
    }
}

/// `forward_masked`: the mask is asked for once; every wanted logit is
/// bitwise `forward`'s; any other logit is `forward`'s or `-inf`; no mask
/// (or one wanting most of the head) gives `forward`'s row whole. Returns
/// whether a sparse mask left some logits out (the head was narrowed).
fn masked_head_equals_full(m: &QwenModel, what: &str) -> bool {
    let prompt = ids(&[10, 40, 77, 256, 200]);
    let next = ids(&[3]);
    let mut full = QwenModel::from_weights(m.weights().clone());
    let width = full.logits_width();
    let words = width.div_ceil(64);
    let want = [
        full.forward(&prompt, 0).unwrap(),
        full.forward(&next, prompt.len()).unwrap(),
    ];
    let set = |ids: &[usize]| {
        let mut w = vec![0u64; words];
        for &i in ids {
            w[i / 64] |= 1 << (i % 64);
        }
        w
    };
    let masks: Vec<Option<Vec<u64>>> = vec![
        Some(set(&[0])),
        Some(set(&[3, 17, 18, 100, width - 1])),
        Some(set(&(0..width).step_by(97).collect::<Vec<_>>())),
        Some(vec![u64::MAX; words]),
        None,
    ];
    let mut narrowed = false;
    for mask in &masks {
        let mut m2 = QwenModel::from_weights(m.weights().clone());
        for (step, (tokens, pos)) in [(&prompt, 0), (&next, prompt.len())]
            .into_iter()
            .enumerate()
        {
            let mut calls = 0;
            let got = m2
                .forward_masked(tokens, pos, &mut || {
                    calls += 1;
                    mask.clone()
                })
                .unwrap();
            assert_eq!(calls, 1, "{what}: the mask asked for once");
            assert_eq!(got.len(), width);
            let full_row = &want[step];
            for i in 0..width {
                let wanted = mask
                    .as_ref()
                    .is_none_or(|w| (w[i / 64] >> (i % 64)) & 1 == 1);
                if wanted {
                    assert_eq!(got[i].to_bits(), full_row[i].to_bits(), "{what}: logit {i}");
                } else if got[i] != f32::NEG_INFINITY {
                    assert_eq!(got[i].to_bits(), full_row[i].to_bits(), "{what}: logit {i}");
                } else {
                    narrowed = true;
                }
            }
        }
    }
    narrowed
}

fn check(path: &Path, what: &str) {
    let mut m = QwenModel::load(path).unwrap();
    let prompt = ids(&[10, 40, 77, 256, 200]);
    forward_all_equals_steps(
        &mut m,
        &prompt,
        &ids(&[3, 91, 5, 260, 11, 12, 13, 14, 15]),
        what,
    );
    let prompts = vec![
        ids(&[1, 2, 3]),
        ids(&[9; 11]),
        ids(&[100, 200]),
        ids(&[5; 30]),
        ids(&[7]),
    ];
    step_batch_equals_steps(&m, &prompts, &ids(&[7, 8, 9, 10, 11]), what);
    mixed_chunks_equal_alone(&m, what);
    masked_head_equals_full(&m, what);
}

#[test]
fn tiny_f32_rows_are_bitwise_independent() {
    for arch in ["qwen2", "qwen3"] {
        check(&tiny(arch, "f32", None), &format!("{arch} f32"));
    }
}

#[test]
fn tiny_quantized_rows_are_bitwise_independent() {
    for arch in ["qwen2", "qwen3"] {
        let plans: [(&str, Plan); 2] = [("mixed", mixed), ("kquants", kquants)];
        for (tag, plan) in plans {
            let path = tiny(arch, tag, Some(plan));
            check(&path, &format!("{arch} {tag}"));
        }
    }
}

#[test]
fn real_model_rows_are_bitwise_independent() {
    let home = match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        }
    };
    let path = home.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !path.exists() {
        eprintln!(
            "skipping: {} not found (run scripts/fetch-assets)",
            path.display()
        );
        return;
    }
    let mut m = QwenModel::load(&path).unwrap();
    // "The capital of France is" then a speculative-sized stretch.
    let prompt = ids(&[785, 6722, 315, 9625, 374]);
    forward_all_equals_steps(
        &mut m,
        &prompt,
        &ids(&[12095, 13, 576, 6722, 315, 9856]),
        "0.5B",
    );
    let prompts = vec![
        prompt.clone(),
        ids(&[40, 1079, 264]),
        ids(&[1, 2, 3, 4, 5, 6, 7, 8, 9]),
        ids(&[785]),
    ];
    step_batch_equals_steps(&m, &prompts, &ids(&[12095, 6722, 10, 11]), "0.5B");
    // The 0.5B's head is `Q8_0`: a sparse mask skips most of it.
    assert!(
        masked_head_equals_full(&m, "0.5B"),
        "0.5B: a sparse mask computed the whole head"
    );
    mixed_chunks_equal_alone(&m, "0.5B");
}

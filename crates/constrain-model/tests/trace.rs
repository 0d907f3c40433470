//! The step trace with scripted models: tracing changes nothing about the
//! generation, and each field is what the trace module documents, checked
//! against values computed here from the fake model's logits.

use constrain::sampling::SamplingConfig;
use constrain::vocab::TokenId;
use constrain::Matcher;
use constrain_model::generate::{generate, generate_traced, GenerateConfig};
use constrain_model::inspector;
use constrain_model::trace::{Trace, TOP_LOGITS};
use constrain_testkit::tiny::regex_index as index;
use constrain_testkit::{tiny, FakeModel};
use std::sync::Arc;

/// Deterministic pseudo-random logits from the sequence so far (so the same
/// sequence always gets the same logits, as a real model would).
fn random_model(width: usize) -> FakeModel {
    FakeModel::random(width, 0)
}

/// The logits the fake model gives after `seq`.
fn logits_after(width: usize, seq: &[TokenId]) -> Vec<f32> {
    let mut m = random_model(width);
    constrain_model::LanguageModel::forward(&mut m, seq, 0).unwrap()
}

fn lse(xs: impl Iterator<Item = f32>) -> f64 {
    xs.map(|x| (x as f64).exp()).sum::<f64>().ln()
}

const RE: &str = r#"\{"name":"(alpha|beta|gamma)","n":[0-9]{1,3}\}"#;

#[test]
fn trace_does_not_change_the_output_and_fields_are_right() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let prompt = t.tokenizer.encode("name a thing").unwrap();
    for (seed, sampling) in [
        (1, SamplingConfig::default()),
        (2, SamplingConfig::greedy()),
        (3, SamplingConfig::default().temperature(0.7).top_p(0.9)),
    ] {
        for jump in [true, false] {
            let cfg = GenerateConfig::default()
                .max_tokens(40)
                .sampling(sampling.clone())
                .seed(seed)
                .jump_forward(jump)
                .ignore_eos(false)
                .mask_overlap(true);
            let mut plain_bytes = Vec::new();
            let mut m = Matcher::from_index(idx.clone());
            let plain = generate(
                &mut random_model(width),
                &vocab,
                Some(&t.tokenizer),
                Some(&mut m),
                &prompt,
                &cfg,
                &mut |b| plain_bytes.extend_from_slice(b),
            )
            .unwrap();
            let mut traced_bytes = Vec::new();
            let mut m = Matcher::from_index(idx.clone());
            let (traced, steps) = generate_traced(
                &mut random_model(width),
                &vocab,
                Some(&t.tokenizer),
                Some(&mut m),
                &prompt,
                &cfg,
                &mut |b| traced_bytes.extend_from_slice(b),
            )
            .unwrap();
            // Same output, same stream.
            assert_eq!(plain.tokens, traced.tokens);
            assert_eq!(plain.bytes, traced.bytes);
            assert_eq!(plain_bytes, traced_bytes);
            assert!(traced.accepted);

            // One step per output token, plus the EOS pick when there is one.
            let ids: Vec<TokenId> = steps.iter().map(|s| TokenId(s.token.id)).collect();
            assert!(ids.len() == traced.tokens.len() || ids.len() == traced.tokens.len() + 1);
            assert_eq!(&ids[..traced.tokens.len()], &traced.tokens[..]);
            if ids.len() > traced.tokens.len() {
                assert!(vocab.is_eos(*ids.last().unwrap()));
            }
            if jump {
                assert!(
                    steps.iter().any(|s| s.forced),
                    "the regex forces `{{\"name\":\"`"
                );
            } else {
                assert!(steps.iter().all(|s| !s.forced));
            }

            // Replay the guide and recompute each step from the model's logits.
            let mut guide = Matcher::from_index(idx.clone());
            let mut seq = prompt.clone();
            let mut bytes = Vec::new();
            for (i, s) in steps.iter().enumerate() {
                let id = TokenId(s.token.id);
                assert_eq!(s.step, i);
                assert_eq!(s.token.bytes, vocab.decode(&[id]));
                bytes.extend_from_slice(&s.token.bytes);
                if s.forced {
                    assert!(s.top.is_empty());
                    assert_eq!(s.logprob, 0.0);
                    assert_eq!(s.token.logit, None);
                    assert_eq!(guide.forced_bytes().first(), s.token.bytes.first());
                } else {
                    let l = logits_after(width, &seq);
                    let allowed = guide.allowed();
                    assert!(allowed.contains(id));
                    assert_eq!(s.token.logit, Some(l[id.as_usize()]));
                    assert_eq!(s.allowed_count, allowed.len());
                    let kept = lse(allowed.iter().map(|t| l[t.as_usize()]));
                    let all = lse(l.iter().copied());
                    let want_lp = l[id.as_usize()] as f64 - kept;
                    assert!(
                        (s.logprob - want_lp).abs() < 1e-6,
                        "{} vs {want_lp}",
                        s.logprob
                    );
                    let removed = 1.0 - (kept - all).exp();
                    assert!((s.allowed_mass.unwrap() - removed).abs() < 1e-6);
                    // Top 16 raw logits, best first, with the mask's verdict.
                    assert_eq!(s.top.len(), TOP_LOGITS);
                    let mut sorted: Vec<f32> = l.clone();
                    sorted.sort_by(|a, b| b.total_cmp(a));
                    for (k, e) in s.top.iter().enumerate() {
                        assert_eq!(e.logit, sorted[k]);
                        assert_eq!(e.logit, l[e.id as usize]);
                        assert_eq!(e.allowed, allowed.contains(TokenId(e.id)));
                    }
                }
                guide.advance(id).unwrap();
                seq.push(id);
            }
            assert_eq!(bytes, traced.bytes);
            let trace = Trace::new("fake", "name a thing", serde_json::json!({}), steps.clone());
            let sum: f64 = steps.iter().map(|s| s.logprob).sum();
            assert_eq!(trace.sequence_logprob, sum);
            assert!(sum < 0.0);
        }
    }
}

/// The JSON form has exactly the documented names.
#[test]
fn trace_json_field_names() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let prompt = t.tokenizer.encode("x").unwrap();
    let mut m = Matcher::from_index(idx);
    let (_, steps) = generate_traced(
        &mut random_model(width),
        &vocab,
        Some(&t.tokenizer),
        Some(&mut m),
        &prompt,
        &GenerateConfig::greedy(40),
        &mut |_| {},
    )
    .unwrap();
    let v = serde_json::to_value(Trace::new(
        "m.gguf",
        "x",
        serde_json::json!({"max_tokens": 40}),
        steps,
    ))
    .unwrap();
    let keys =
        |v: &serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(&v),
        ["model", "prompt", "settings", "steps", "sequence_logprob"]
    );
    let steps = v["steps"].as_array().unwrap();
    let sampled = steps.iter().find(|s| s["forced"] == false).unwrap();
    assert_eq!(
        keys(sampled),
        [
            "step",
            "token",
            "forced",
            "logprob",
            "allowed_count",
            "allowed_mass",
            "top"
        ]
    );
    assert_eq!(keys(&sampled["token"]), ["id", "text", "bytes", "logit"]);
    assert_eq!(keys(&sampled["top"][0]), ["id", "text", "logit", "allowed"]);
    let forced = steps.iter().find(|s| s["forced"] == true).unwrap();
    assert_eq!(forced["top"], serde_json::json!([]));
    assert_eq!(forced["logprob"], 0.0);
    // It reads back.
    let back: Trace = serde_json::from_value(v).unwrap();
    assert_eq!(back.model, "m.gguf");
}

/// The page marks steps, bars, the chosen bar and the sliders as documented,
/// escapes token text and needs no network.
#[test]
fn inspector_page_structure() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let prompt = t.tokenizer.encode("x").unwrap();
    let mut m = Matcher::from_index(idx);
    let (_, steps) = generate_traced(
        &mut random_model(width),
        &vocab,
        Some(&t.tokenizer),
        Some(&mut m),
        &prompt,
        &GenerateConfig::greedy(40),
        &mut |_| {},
    )
    .unwrap();
    let trace = Trace::new(
        "m.gguf",
        "<script>alert(1)</script>",
        serde_json::json!({}),
        steps.clone(),
    );
    let html = inspector::page(&trace);
    assert!(html.starts_with("<!DOCTYPE html>"));
    for s in &steps {
        assert!(html.contains(&format!("data-step=\"{}\"", s.step)));
    }
    let bars = html.matches("data-token-id=\"").count();
    let want: usize = steps.iter().map(|s| s.top.len()).sum();
    assert_eq!(bars, want);
    assert_eq!(html.matches("data-prob=\"\"").count(), want);
    let masked: usize = steps
        .iter()
        .flat_map(|s| &s.top)
        .filter(|e| !e.allowed)
        .count();
    assert!(masked > 0, "random logits put masked tokens in the top 16");
    // (with the leading space: the style sheet has `[data-allowed="false"]`)
    assert_eq!(html.matches(" data-allowed=\"false\"").count(), masked);
    assert_eq!(html.matches("data-allowed=\"true\"").count(), want - masked);
    let chosen = steps
        .iter()
        .filter(|s| s.top.iter().any(|e| e.id == s.token.id))
        .count();
    assert_eq!(
        html.matches("data-chosen=\"true\"").count(),
        chosen,
        "{}",
        html.matches("[data-chosen]").count()
    );
    assert_eq!(html.matches("data-control=\"temperature\"").count(), 2); // input + script selector
    assert_eq!(html.matches("data-control=\"top-p\"").count(), 2);
    // Escaped: the prompt cannot open a script.
    assert!(!html.contains("<script>alert(1)"));
    // Self-contained: no external resource.
    for bad in ["src=\"http", "href=\"http", "@import", "url(http", "<link"] {
        assert!(!html.contains(bad), "{bad}");
    }
    // The component is the page's body.
    assert!(html.contains(&inspector::component(&trace)));
}

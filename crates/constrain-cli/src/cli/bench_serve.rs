//! `constrain bench-serve`: a bounded load against a running `constrain
//! serve` (loopback by default). Sends `--requests` streamed chat
//! completions, `--concurrency` at a time, under a JSON Schema or tools,
//! checks every answer with the `jsonschema` validator, and prints latency
//! p50 / p99, time to first token, per-request and aggregate decode tokens
//! per second, end-to-end tokens per second, the count of errors and of
//! invalid answers, and (with `--server-pid`) the server's resident memory.
//!
//! Definitions (each request streamed, `stream_options.include_usage`):
//!
//! * **TTFT**: from sending the request to the first chunk carrying content
//!   or a tool call. Under a schema that is often jump-forward text the
//!   server writes before the model has run; `--logprobs` asks for
//!   `logprobs` (the server then turns jump-forward off), so that the first
//!   chunk is the model's first sampled token for every kind of request.
//! * **decode tokens/s of a request**: its completion tokens after the
//!   first, over the time from its first chunk to its end.
//! * **aggregate decode tokens/s**: all requests' completion tokens after
//!   their first, over the decode wall time: the time during which at least
//!   one request was between its first chunk and its end.
//! * **end-to-end tokens/s**: all completion tokens over the whole run.

use anyhow::{bail, Context};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct BenchServeArgs {
    /// host:port of the server.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: String,
    /// Requests in all.
    #[arg(long, default_value_t = 16)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// max_tokens of each request.
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// JSON Schema file for response_format (default: free text).
    #[arg(long, value_name = "FILE", conflicts_with = "tools")]
    schema: Option<PathBuf>,
    /// OpenAI tools array (JSON file), sent with tool_choice "required".
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// The user message.
    #[arg(
        long,
        default_value = "What is the weather like in Paris right now, in celsius?"
    )]
    prompt: String,
    /// Make every request's prompt its own: the user message ends with
    /// " (request N)", so prompts share the chat template but not their
    /// last tokens (the prompt-prefix cache then reuses only the shared part).
    #[arg(long)]
    distinct_prompts: bool,
    /// Bearer token.
    #[arg(long)]
    api_key: Option<String>,
    /// Ask for `logprobs` (top 1): the server turns jump-forward off, so the
    /// first chunk is the model's first sampled token.
    #[arg(long)]
    logprobs: bool,
    /// The server's process id: its resident memory (VmRSS, from
    /// /proc/PID/status) is sampled before, during and after the run.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
}

/// Resident memory of a process in KiB (VmRSS in /proc/PID/status).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Length of the union of the intervals.
fn union_len(mut iv: Vec<(f64, f64)>) -> f64 {
    iv.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (a, b) in iv {
        match cur {
            Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((a, b)) = cur {
        total += b - a;
    }
    total
}

struct Outcome {
    /// When the request was sent, from the start of the run.
    sent: Duration,
    latency: Duration,
    ttft: Option<Duration>,
    tokens: u64,
    error: Option<String>,
    invalid: Option<String>,
    /// finish_reason, content, tool calls (name, arguments).
    answer: Option<(String, String, Vec<(String, String)>)>,
}

fn read_json(path: &PathBuf) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

pub fn run(a: BenchServeArgs) -> anyhow::Result<ExitCode> {
    if a.concurrency == 0 || a.requests == 0 {
        bail!("--requests and --concurrency must be at least 1");
    }
    let schema = a.schema.as_ref().map(read_json).transpose()?;
    let tools = a.tools.as_ref().map(read_json).transpose()?;
    let validator = match &schema {
        Some(s) => Some(
            jsonschema::validator_for(s)
                .map_err(|e| anyhow::anyhow!("the oracle cannot compile the schema: {e}"))?,
        ),
        None => None,
    };
    let mut tool_validators = Vec::new();
    for t in tools
        .iter()
        .flat_map(|t| t.as_array().cloned().unwrap_or_default())
    {
        let name = t["function"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let params = t["function"]
            .get("parameters")
            .cloned()
            .unwrap_or(json!({"type": "object"}));
        let v =
            jsonschema::validator_for(&params).map_err(|e| anyhow::anyhow!("tool {name}: {e}"))?;
        tool_validators.push((name, v));
    }
    if let Some(pid) = a.server_pid {
        if rss_kib(pid).is_none() {
            bail!("cannot read the resident memory of process {pid} (/proc/{pid}/status)");
        }
    }
    let next = Arc::new(Mutex::new(0usize));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let rss_start = a.server_pid.and_then(rss_kib);
    // (requests done, KiB) samples of the server's memory.
    let rss_samples: Mutex<Vec<(usize, u64)>> = Mutex::new(Vec::new());
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..a.concurrency {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    if *n >= a.requests {
                        break;
                    }
                    *n += 1;
                    *n - 1
                };
                let mut body = json!({
                    "model": "bench", "stream": true, "stream_options": {"include_usage": true},
                    "messages": [{"role": "user", "content": if a.distinct_prompts {
                        format!("{} (request {i})", a.prompt)
                    } else {
                        a.prompt.clone()
                    }}],
                    "max_tokens": a.max_tokens, "seed": i, "temperature": 0.7,
                });
                if let Some(s) = &schema {
                    body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "bench", "schema": s, "strict": true}});
                }
                if let Some(t) = &tools {
                    body["tools"] = t.clone();
                    body["tool_choice"] = json!("required");
                }
                if a.logprobs {
                    body["logprobs"] = json!(true);
                    body["top_logprobs"] = json!(1);
                }
                let sent = t0.elapsed();
                let mut o = one(&a.addr, a.api_key.as_deref(), &body);
                o.sent = sent;
                if o.error.is_none() {
                    o.invalid = check(&o, validator.as_ref(), &tool_validators);
                }
                let done = {
                    let mut all = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                    all.push(o);
                    all.len()
                };
                if let Some(pid) = a.server_pid {
                    // About 20 samples over the run (and the last request).
                    if done % (a.requests / 20).max(1) == 0 || done == a.requests {
                        if let Some(k) = rss_kib(pid) {
                            rss_samples.lock().unwrap_or_else(|e| e.into_inner()).push((done, k));
                        }
                    }
                }
            });
        }
    });
    let wall = t0.elapsed();
    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap_or_else(|e| e.into_inner()));
    let mut lat: Vec<f64> = outcomes
        .iter()
        .filter(|o| o.error.is_none())
        .map(|o| o.latency.as_secs_f64() * 1e3)
        .collect();
    let mut ttft: Vec<f64> = outcomes
        .iter()
        .filter_map(|o| o.ttft)
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    lat.sort_by(f64::total_cmp);
    ttft.sort_by(f64::total_cmp);
    let tokens: u64 = outcomes.iter().map(|o| o.tokens).sum();
    // The decode phase: from each request's first chunk to its end.
    let decoding: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.error.is_none() && o.ttft.is_some() && o.tokens > 1)
        .collect();
    let decode_tokens: u64 = decoding.iter().map(|o| o.tokens - 1).sum();
    let decode_wall = union_len(
        decoding
            .iter()
            .map(|o| {
                let from = (o.sent + o.ttft.unwrap_or_default()).as_secs_f64();
                (from, (o.sent + o.latency).as_secs_f64())
            })
            .collect(),
    );
    let mut per_request: Vec<f64> = decoding
        .iter()
        .filter_map(|o| {
            let t = (o.latency - o.ttft.unwrap_or_default()).as_secs_f64();
            (t > 0.0).then(|| (o.tokens - 1) as f64 / t)
        })
        .collect();
    per_request.sort_by(f64::total_cmp);
    let errors: Vec<&String> = outcomes.iter().filter_map(|o| o.error.as_ref()).collect();
    let invalid: Vec<&String> = outcomes.iter().filter_map(|o| o.invalid.as_ref()).collect();
    let pct = |v: &[f64], p: f64| {
        if v.is_empty() {
            f64::NAN
        } else {
            v[((v.len() - 1) as f64 * p).round() as usize]
        }
    };
    println!(
        "requests            {} ({} at a time)",
        a.requests, a.concurrency
    );
    println!("wall time           {:.2} s", wall.as_secs_f64());
    println!(
        "latency p50 / p99   {:.0} / {:.0} ms",
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
    println!(
        "TTFT p50 / p99      {:.0} / {:.0} ms",
        pct(&ttft, 0.5),
        pct(&ttft, 0.99)
    );
    println!(
        "completion tokens   {tokens} ({:.1} tokens/s end to end)",
        tokens as f64 / wall.as_secs_f64()
    );
    println!(
        "decode tokens/s     {:.1} aggregate ({decode_tokens} tokens after the first in {:.2} s of decoding); per request p50 {:.1}, min {:.1}",
        decode_tokens as f64 / decode_wall.max(1e-9),
        decode_wall,
        pct(&per_request, 0.5),
        per_request.first().copied().unwrap_or(f64::NAN),
    );
    if let (Some(pid), Some(start)) = (a.server_pid, rss_start) {
        let samples = std::mem::take(&mut *rss_samples.lock().unwrap_or_else(|e| e.into_inner()));
        let end = rss_kib(pid).unwrap_or(0);
        let max = samples.iter().map(|s| s.1).max().unwrap_or(end).max(end);
        // Growth over the second half of the run (after warm-up: caches filled).
        let half = samples
            .iter()
            .find(|s| s.0 >= a.requests / 2)
            .map_or(start, |s| s.1);
        println!(
            "server RSS          {:.1} MiB before, {:.1} MiB at half, {:.1} MiB after, {:.1} MiB max; second half {:+.1} MiB",
            start as f64 / 1024.0,
            half as f64 / 1024.0,
            end as f64 / 1024.0,
            max as f64 / 1024.0,
            (end as f64 - half as f64) / 1024.0
        );
    }
    println!("errors              {}", errors.len());
    println!("invalid answers     {}", invalid.len());
    for e in errors.iter().chain(invalid.iter()).take(5) {
        println!("  {e}");
    }
    Ok(if errors.is_empty() && invalid.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn check(
    o: &Outcome,
    schema: Option<&jsonschema::Validator>,
    tools: &[(String, jsonschema::Validator)],
) -> Option<String> {
    let (finish, content, calls) = o.answer.as_ref()?;
    if let Some(v) = schema {
        if finish != "stop" {
            return Some(format!("finish_reason {finish:?} for a schema answer"));
        }
        let doc: Value = match serde_json::from_str(content) {
            Ok(d) => d,
            Err(e) => return Some(format!("{content:?} does not parse: {e}")),
        };
        if let Err(e) = v.validate(&doc) {
            return Some(format!("{doc} does not validate: {e}"));
        }
    }
    if !tools.is_empty() {
        if finish != "tool_calls" || calls.is_empty() {
            return Some(format!(
                "finish_reason {finish:?} with {} calls under tool_choice required",
                calls.len()
            ));
        }
        for (name, args) in calls {
            let Some((_, v)) = tools.iter().find(|(n, _)| n == name) else {
                return Some(format!("call to unknown tool {name:?}"));
            };
            let doc: Value = match serde_json::from_str(args) {
                Ok(d) => d,
                Err(e) => return Some(format!("arguments {args:?} do not parse: {e}")),
            };
            if let Err(e) = v.validate(&doc) {
                return Some(format!("arguments {doc} of {name} do not validate: {e}"));
            }
        }
    }
    None
}

/// One streamed request: reads SSE events, times the first content, counts usage.
fn one(addr: &str, key: Option<&str>, body: &Value) -> Outcome {
    let start = Instant::now();
    let mut o = Outcome {
        sent: Duration::ZERO,
        latency: Duration::ZERO,
        ttft: None,
        tokens: 0,
        error: None,
        invalid: None,
        answer: None,
    };
    let res = (|| -> anyhow::Result<(String, Vec<(String, String)>, String)> {
        let mut s =
            TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
        let b = body.to_string();
        let auth = key
            .map(|k| format!("Authorization: Bearer {k}\r\n"))
            .unwrap_or_default();
        write!(s, "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{b}", b.len())?;
        let mut r = BufReader::new(s);
        let mut status = String::new();
        r.read_line(&mut status)?;
        if !status.contains(" 200 ") {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut r, &mut rest);
            bail!(
                "{} {}",
                status.trim(),
                rest.lines().last().unwrap_or_default()
            );
        }
        let mut content = String::new();
        let mut calls: Vec<(String, String)> = Vec::new();
        let mut finish = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                break;
            }
            let Some(data) = line.trim_end().strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                break;
            }
            let c: Value =
                serde_json::from_str(data).with_context(|| format!("bad event {data:?}"))?;
            if let Some(e) = c.get("error") {
                bail!("{e}");
            }
            if let Some(u) = c
                .get("usage")
                .and_then(|u| u.get("completion_tokens"))
                .and_then(Value::as_u64)
            {
                o.tokens = u;
            }
            let Some(ch) = c["choices"].as_array().and_then(|a| a.first()) else {
                continue;
            };
            if let Some(t) = ch["delta"]["content"].as_str() {
                if !t.is_empty() && o.ttft.is_none() {
                    o.ttft = Some(start.elapsed());
                }
                content.push_str(t);
            }
            for call in ch["delta"]["tool_calls"].as_array().into_iter().flatten() {
                if o.ttft.is_none() {
                    o.ttft = Some(start.elapsed());
                }
                calls.push((
                    call["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    call["function"]["arguments"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ));
            }
            if let Some(f) = ch["finish_reason"].as_str() {
                finish = f.to_string();
            }
        }
        Ok((content, calls, finish))
    })();
    o.latency = start.elapsed();
    match res {
        Ok((content, calls, finish)) => o.answer = Some((finish, content, calls)),
        Err(e) => o.error = Some(format!("{e:#}")),
    }
    o
}

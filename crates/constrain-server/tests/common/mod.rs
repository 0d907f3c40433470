//! A server on loopback over the tiny vocabulary and a fake model, and a
//! minimal blocking HTTP/1.1 client (no client library: the tests see the
//! bytes on the wire).
#![allow(dead_code)]

use constrain_server::{ModelFactory, SeqModel, ServerConfig, ServerState};
use constrain_testkit::{tiny, FakeModel};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How the fake model behaves.
#[derive(Clone, Copy)]
pub struct Fake {
    /// Sleep per forward pass (a slow model for queue / disconnect tests).
    pub delay_ms: u64,
    /// Context length.
    pub context: usize,
    /// Text the model strongly prefers to begin its answer with (a model
    /// that "wants" to call a tool); random logits elsewhere.
    pub prefer: Option<&'static str>,
}

impl Default for Fake {
    fn default() -> Self {
        Fake {
            delay_ms: 0,
            context: 1 << 16,
            prefer: None,
        }
    }
}

/// Starts a server with random ("adversarial") logits: every instance draws
/// from its own seeded generator, uniform in [-8, 8], so any allowed token
/// may come next, EOS included.
pub fn start(config: ServerConfig, fake: Fake) -> SocketAddr {
    let (tok, factory) = fake_factory(fake);
    let state = ServerState::new(
        config,
        "tiny-fake",
        tok.tokenizer,
        Arc::new(tok.vocab),
        factory,
    )
    .expect("server state");
    constrain_server::spawn(state, "127.0.0.1:0").expect("bind loopback")
}

/// [`start`], with the slots' fake models stepped by the shared decode loop
/// ([`constrain_server::batch`]) under a per-pass prefill budget of
/// `prefill_chunk` tokens: a prompt or jump-forward stretch is fed in
/// chunks, one forward call (and one `delay_ms`) per chunk.
pub fn start_batched(config: ServerConfig, fake: Fake, prefill_chunk: usize) -> SocketAddr {
    use constrain_server::batch::{BatchConfig, Batcher, Looped};
    let (tok, models) = fake_factory(fake);
    let batcher = Batcher::start_with(
        Looped(move || models()),
        BatchConfig::default()
            .prefill_chunk(prefill_chunk)
            .prefix_cache_bytes(0),
    );
    let factory: ModelFactory = Arc::new(move || Ok(Box::new(batcher.handle()?) as SeqModel));
    let state = ServerState::new(
        config,
        "tiny-fake",
        tok.tokenizer,
        Arc::new(tok.vocab),
        factory,
    )
    .expect("server state");
    constrain_server::spawn(state, "127.0.0.1:0").expect("bind loopback")
}

/// The tiny tokenizer and a factory of fake models that behave as `fake`
/// says.
pub fn fake_factory(fake: Fake) -> (constrain_model::GgufTokenizer, ModelFactory) {
    let tok = tiny::tokenizer().expect("tiny tokenizer");
    let width = tok.vocab.logits_width();
    let vocab = tok.vocab.clone();
    static SEED: AtomicU64 = AtomicU64::new(1);
    let factory: ModelFactory = Arc::new(move || {
        let mut rng = rand::rngs::StdRng::seed_from_u64(SEED.fetch_add(1, Ordering::Relaxed));
        let delay = fake.delay_ms;
        let vocab = vocab.clone();
        let m = FakeModel::new(width, move |seq| {
            if delay > 0 {
                std::thread::sleep(Duration::from_millis(delay));
            }
            let mut l: Vec<f32> = (0..width).map(|_| rng.random_range(-8.0f32..8.0)).collect();
            if let Some(p) = fake.prefer {
                let text = vocab.decode(seq);
                let open = b"<|im_start|>assistant\n";
                let start = text
                    .windows(open.len())
                    .rposition(|w| w == open)
                    .map(|i| i + open.len());
                if let Some(out) = start.map(|s| &text[s..]) {
                    if out.len() < p.len() && p.as_bytes().starts_with(out) {
                        let next = p.as_bytes()[out.len()];
                        if let Some((id, _)) = vocab.text_tokens().find(|(_, b)| *b == [next]) {
                            l[id.as_usize()] = 50.0;
                        }
                    }
                }
            }
            l
        })
        .with_context_length(fake.context);
        Ok(Box::new(m) as SeqModel)
    });
    (tok, factory)
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The `data:` payloads of an SSE body.
    pub fn events(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.trim_start().to_string())
            .collect()
    }
}

/// The tiny vocabulary's EOS ids as a `logit_bias` that forbids them.
pub fn no_eos() -> serde_json::Value {
    let tok = tiny::tokenizer().expect("tiny tokenizer");
    let mut m = serde_json::Map::new();
    for e in tok.vocab.eos() {
        m.insert(e.0.to_string(), serde_json::json!(-100));
    }
    serde_json::Value::Object(m)
}

/// Sends one request (`Connection: close`) and reads the whole answer.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120))).ok();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write head");
    if let Some(b) = body {
        // A server may answer (413) before reading everything.
        let _ = s.write_all(b.as_bytes());
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse_reply(&raw)
}

pub fn post(addr: SocketAddr, body: &serde_json::Value) -> Reply {
    http(
        addr,
        "POST",
        "/v1/chat/completions",
        Some(&body.to_string()),
        &[],
    )
}

pub fn parse_reply(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {text:?}"));
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// Validates `instance` against `schema` with the `jsonschema` crate.
pub fn assert_valid(schema: &serde_json::Value, instance: &serde_json::Value) {
    let v = jsonschema::validator_for(schema).expect("oracle compiles the schema");
    if let Err(e) = v.validate(instance) {
        panic!("{instance} is not valid for {schema}: {e}");
    }
}

pub fn user(text: &str) -> serde_json::Value {
    serde_json::json!([{"role": "user", "content": text}])
}

pub fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 6}}, "required": ["zone"], "additionalProperties": false}}}
    ])
}

/// Every call of choice `c` names a tool and its arguments validate.
pub fn assert_calls_valid(c: &Value, tools: &Value) {
    for call in c["message"]["tool_calls"].as_array().unwrap() {
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_valid(
            &tool_params(tools, call["function"]["name"].as_str().unwrap()),
            &args,
        );
    }
}

pub fn tool_params(tools: &Value, name: &str) -> Value {
    tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == name)
        .unwrap_or_else(|| panic!("the model called {name:?}, which is not a tool"))["function"]
        ["parameters"]
        .clone()
}

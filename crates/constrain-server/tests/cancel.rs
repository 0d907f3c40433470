//! A client that goes away in the middle of a long prompt, or of a long
//! jump-forward stretch, frees its slot within one chunk of the shared
//! decode loop, not after the whole feed. The fake model sleeps for each
//! forward call, so a 2,000-token prompt fed 8 tokens a pass takes
//! 250 passes (about 5 s); the slot must be free well within 1 s of the
//! disconnect.

mod common;

use common::*;
use constrain_server::ServerConfig;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const CHUNK: usize = 8;

fn active(addr: SocketAddr) -> u64 {
    http(addr, "GET", "/health", None, &[]).json()["active"]
        .as_u64()
        .unwrap()
}

fn wait_active(addr: SocketAddr, n: u64, within: Duration) -> Duration {
    let t = Instant::now();
    while active(addr) != n {
        assert!(
            t.elapsed() < within,
            "active did not reach {n} within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    t.elapsed()
}

/// Sends `body`, waits until its slot is taken and `after` more, then
/// drops the connection; returns how long the slot took to come free.
fn disconnect_after(addr: SocketAddr, body: &Value, after: Duration) -> Duration {
    let body = body.to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    wait_active(addr, 1, Duration::from_secs(10));
    std::thread::sleep(after);
    // Nothing has come back yet: the feed is still going.
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    let got = s.read(&mut buf).map_or(0, |n| n);
    let head = String::from_utf8_lossy(&buf[..got]).into_owned();
    drop(s);
    let freed = wait_active(addr, 0, Duration::from_secs(10));
    assert!(
        !head.contains("\r\n\r\n{"),
        "the request finished before the disconnect: {head}"
    );
    freed
}

fn server() -> SocketAddr {
    start_batched(
        ServerConfig::default().parallel(1),
        Fake {
            delay_ms: 20,
            ..Fake::default()
        },
        CHUNK,
    )
}

#[test]
fn a_client_gone_mid_prefill_frees_its_slot_within_a_chunk() {
    let addr = server();
    for stream in [false, true] {
        let body = json!({
            "messages": user(&"z".repeat(2000)),
            "max_tokens": 5,
            "stream": stream,
        });
        let freed = disconnect_after(addr, &body, Duration::from_millis(400));
        eprintln!("prefill, stream {stream}: slot free {freed:?} after the disconnect");
        assert!(
            freed < Duration::from_secs(1),
            "stream {stream}: the slot took {freed:?} to come free"
        );
        let r = post(addr, &json!({"messages": user("x"), "max_tokens": 3}));
        assert_eq!(r.status, 200, "{}", r.body);
    }
}

#[test]
fn a_client_gone_mid_jump_forward_frees_its_slot_within_a_chunk() {
    let addr = server();
    // 3,000 forced bytes, then a choice: one jump-forward stretch after the
    // (short) prompt, fed before the model picks the last byte.
    let body = json!({
        "messages": user("x"),
        "structured_outputs": {"regex": "q{3000}[ab]"},
        "max_tokens": 3500,
    });
    let freed = disconnect_after(addr, &body, Duration::from_millis(600));
    eprintln!("jump-forward: slot free {freed:?} after the disconnect");
    assert!(
        freed < Duration::from_secs(1),
        "the slot took {freed:?} to come free"
    );
    // Run whole, the same request completes with the forced text.
    let r = post(
        addr,
        &json!({
            "messages": user("x"),
            "structured_outputs": {"regex": "q{40}[ab]"},
            "max_tokens": 100,
        }),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let text = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.len() == 41 && text.starts_with(&"q".repeat(40)),
        "{text:?}"
    );
}

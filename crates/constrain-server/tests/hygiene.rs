//! HTTP hygiene over raw sockets: a body HTTP cannot frame is a 400 (not a
//! 413), a head or body that stops arriving is a 408 within the read
//! timeout, connections past the cap are a 503 with `Retry-After`, the API
//! key is compared exactly. After each fault a normal request is served.

mod common;

use common::*;
use constrain_server::ServerConfig;
use serde_json::json;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Connects, writes `bytes`, optionally closes the write side, and reads
/// the answer (up to `wait`).
fn raw(addr: SocketAddr, bytes: &[u8], half_close: bool, wait: Duration) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(wait)).unwrap();
    s.write_all(bytes).expect("write");
    if half_close {
        s.shutdown(Shutdown::Write).unwrap();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    parse_reply(&out)
}

fn assert_error(r: &Reply, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    let e = &r.json()["error"];
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
    assert!(e["type"].is_string(), "{e}");
    assert!(e.as_object().unwrap().contains_key("param"), "{e}");
    assert_eq!(e["code"], code, "{e}");
}

fn still_serves(addr: SocketAddr) {
    let r = post(addr, &json!({"messages": user("x"), "max_tokens": 3}));
    assert_eq!(r.status, 200, "{}", r.body);
}

const HEAD: &str =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";

#[test]
fn a_body_http_cannot_frame_is_400() {
    let addr = start(ServerConfig::default(), Fake::default());
    let body = json!({"messages": user("x"), "max_tokens": 3}).to_string();
    // A chunk size that is not hexadecimal.
    let bad_chunk = format!("{HEAD}Transfer-Encoding: chunked\r\n\r\nzz\r\n{body}\r\n0\r\n\r\n");
    let r = raw(addr, bad_chunk.as_bytes(), false, Duration::from_secs(10));
    assert_error(&r, 400, "malformed_body");
    assert_eq!(r.header("connection"), Some("close"));
    // A chunk that says more bytes than it holds, then the end.
    let short_chunk = format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n400\r\n{body}");
    let r = raw(addr, short_chunk.as_bytes(), true, Duration::from_secs(10));
    assert_error(&r, 400, "malformed_body");
    // Fewer bytes than Content-Length, then the end of what is sent.
    let short = format!("{HEAD}Content-Length: {}\r\n\r\n{}", body.len() + 50, body);
    let r = raw(addr, short.as_bytes(), true, Duration::from_secs(10));
    assert_error(&r, 400, "malformed_body");
    // A well-framed chunked body is served.
    let good = format!(
        "{HEAD}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let r = raw(addr, good.as_bytes(), false, Duration::from_secs(10));
    assert_eq!(r.status, 200, "{}", r.body);
    // The body limit is still a 413.
    let big = format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(big.as_bytes()).unwrap();
    let chunk = format!("100000\r\n{}\r\n", "a".repeat(0x100000));
    for _ in 0..10 {
        if s.write_all(chunk.as_bytes()).is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_error(&parse_reply(&out), 413, "request_too_large");
    still_serves(addr);
}

#[test]
fn a_head_or_body_that_stops_arriving_is_408_within_the_read_timeout() {
    let timeout = Duration::from_millis(800);
    let addr = start(
        ServerConfig::default().read_timeout(timeout),
        Fake::default(),
    );
    // A head that stops halfway.
    let t = Instant::now();
    let r = raw(
        addr,
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-",
        false,
        Duration::from_secs(10),
    );
    let took = t.elapsed();
    assert_error(&r, 408, "request_timeout");
    assert!(
        took >= timeout && took < timeout + Duration::from_millis(1500),
        "head timeout after {took:?}"
    );
    // A connection that sends nothing.
    let r = raw(addr, b"", false, Duration::from_secs(10));
    assert_error(&r, 408, "request_timeout");
    // A body that stops arriving: 10 of 100 bytes.
    let t = Instant::now();
    let r = raw(
        addr,
        format!("{HEAD}Content-Length: 100\r\n\r\n{{\"messages\"").as_bytes(),
        false,
        Duration::from_secs(10),
    );
    let took = t.elapsed();
    assert_error(&r, 408, "request_timeout");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(
        took >= timeout && took < timeout + Duration::from_millis(1500),
        "body timeout after {took:?}"
    );
    // A body sent a byte at a time, each well within the timeout, but the
    // whole of it not: the timeout is for the whole body.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{HEAD}Content-Length: 100\r\n\r\n").as_bytes())
        .unwrap();
    let t = Instant::now();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        if s.write_all(b" ").is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_error(&parse_reply(&out), 408, "request_timeout");
    assert!(t.elapsed() < timeout + Duration::from_millis(2500));
    still_serves(addr);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_without_an_answer() {
    let addr = start(
        ServerConfig::default().read_timeout(Duration::from_millis(500)),
        Fake::default(),
    );
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let t = Instant::now();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(text.matches("HTTP/1.1").count(), 1, "{text}");
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn connections_past_the_cap_are_503_with_retry_after() {
    let addr = start(
        ServerConfig::default()
            .max_connections(2)
            .read_timeout(Duration::from_secs(20)),
        Fake::default(),
    );
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Let the server accept both.
    std::thread::sleep(Duration::from_millis(200));
    let body = json!({"messages": user("x"), "max_tokens": 3}).to_string();
    let req = format!(
        "{HEAD}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let r = raw(addr, req.as_bytes(), false, Duration::from_secs(10));
    assert_error(&r, 503, "too_many_connections");
    assert_eq!(r.header("retry-after"), Some("1"));
    drop(held);
    // The slots come back once the held connections close.
    let t = Instant::now();
    loop {
        let r = raw(addr, req.as_bytes(), false, Duration::from_secs(10));
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(t.elapsed() < Duration::from_secs(5), "the cap never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_api_key_is_compared_exactly() {
    let addr = start(
        ServerConfig::default().api_key(Some("sekrit".into())),
        Fake::default(),
    );
    let body = json!({"messages": user("x"), "max_tokens": 3}).to_string();
    let ask = |auth: &str| {
        http(
            addr,
            "POST",
            "/v1/chat/completions",
            Some(&body),
            &[("Authorization", auth)],
        )
        .status
    };
    assert_eq!(ask("Bearer sekrit"), 200);
    for wrong in [
        "Bearer  sekrit",
        "Bearer \tsekrit",
        "Bearer sekrit\tx",
        "Bearer sekri",
        "Bearer sekritt",
        "Bearer SEKRIT",
        "Bearer ",
        "bearer sekrit",
    ] {
        assert_eq!(ask(wrong), 401, "{wrong:?} was let in");
    }
}

//! Server memory stays flat over 1,000 sequential requests (its own test
//! binary, so that no other test allocates in the process meanwhile).

mod common;

use common::*;
use constrain_server::ServerConfig;
use serde_json::json;

fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn memory_is_flat_over_a_thousand_requests() {
    if rss_bytes().is_none() {
        eprintln!("skipping: /proc/self/statm is not available on this system");
        return;
    }
    let addr = start(ServerConfig::default().parallel(2), Fake::default());
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 5}}, "required": ["a", "b"]});
    let one = |i: usize| {
        let stream = i % 3 == 0;
        let r = post(
            addr,
            &json!({
                "messages": user("x"), "max_tokens": 30, "seed": i, "stream": stream,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
            }),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    };
    for i in 0..200 {
        one(i);
    }
    let before = rss_bytes().unwrap();
    for i in 200..1200 {
        one(i);
    }
    let after = rss_bytes().unwrap();
    let growth = after.saturating_sub(before);
    eprintln!(
        "rss after 200 requests: {} KiB, after 1,200: {} KiB",
        before / 1024,
        after / 1024
    );
    assert!(
        growth < 8 << 20,
        "memory grew by {} KiB over 1,000 requests",
        growth / 1024
    );
}

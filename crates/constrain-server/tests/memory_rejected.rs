//! Memory that rejected requests took comes back: big bodies refused by
//! the prompt's token count (the schema is part of the prompt) leave the
//! server's resident set where it was (its own test binary, so that no
//! other test allocates in the process meanwhile).

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
fn rejected_big_schemas_give_their_memory_back() {
    if rss_bytes().is_none() {
        eprintln!("skipping: /proc/self/statm is not available on this system");
        return;
    }
    let addr = start(
        ServerConfig::default(),
        Fake {
            context: 4096,
            ..Fake::default()
        },
    );
    assert_eq!(
        post(addr, &json!({"messages": user("x"), "max_tokens": 3})).status,
        200
    );
    let before = rss_bytes().unwrap();
    for k in 0..4 {
        // About 1.5 MB: 100,000 strings.
        let values: Vec<String> = (0..100_000).map(|i| format!("v{k}-{i}")).collect();
        let r = post(
            addr,
            &json!({
                "messages": user("x"),
                "response_format": {"type": "json_schema", "json_schema": {"name": "e", "schema": {"enum": values}}},
            }),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.json()["error"]["code"], "context_length_exceeded");
        // Counted on its head alone.
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("more than") && msg.contains("first"), "{msg}");
    }
    assert_eq!(
        post(addr, &json!({"messages": user("x"), "max_tokens": 3})).status,
        200
    );
    let after = rss_bytes().unwrap();
    let grown = after.saturating_sub(before) >> 20;
    eprintln!(
        "RSS {} MB -> {} MB after 4 rejected 1.5 MB schemas",
        before >> 20,
        after >> 20
    );
    assert!(grown < 64, "RSS grew by {grown} MB");
    assert_eq!(
        http(addr, "GET", "/health", None, &[]).json()["compiles_total"],
        0
    );
}

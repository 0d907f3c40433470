//! Compares the subset parser with regex-syntax on regex files (a
//! development aid): `cargo run --release --example parse_check -- FILE...`.
use std::time::Instant;
fn main() {
    let (mut same, mut fallback, mut differ) = (0, 0, 0);
    let (mut tf, mut tr) = (0.0, 0.0);
    for f in std::env::args().skip(1) {
        let p = std::fs::read_to_string(&f).unwrap();
        let t = Instant::now();
        let a = constrain::dfa::ByteDfa::parse_subset(&p);
        tf += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let b = regex_syntax::ParserBuilder::new()
            .nest_limit(1000)
            .build()
            .parse(&p)
            .ok();
        tr += t.elapsed().as_secs_f64();
        match a {
            None => {
                fallback += 1;
                println!("fallback {f}");
            }
            Some(h) if Some(&h) == b.as_ref() => same += 1,
            Some(_) => {
                differ += 1;
                println!("DIFFER {f}");
            }
        }
    }
    println!(
        "same {same} fallback {fallback} differ {differ}; subset {tf:.2} s, regex-syntax {tr:.2} s"
    );
}

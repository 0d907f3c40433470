//! Triage of MaskBench files at the schema stage only (a development aid,
//! no token index): compiles each schema with the runner's options and
//! matches every instance's text against the whole-document regex.
//! `cargo run --release -p constrain-testkit --example schema_triage -- FILE...`
//! prints one line per file: `ok`, `ERR <message>`, `VR <n>` (valid
//! instances the regex rejects), `INV <n>` (invalid instances it accepts),
//! or `SLOW` when the regex is too large to check here.
use constrain_testkit::maskbench::{self, RunConfig};
fn main() {
    let mut cfg = RunConfig::default();
    cfg.schema.any_order_max_properties = std::env::var("AOM")
        .map(|v| v.parse().unwrap())
        .unwrap_or(3);
    cfg.schema.any_order_max_len = 1 << 24;
    for f in std::env::args().skip(1) {
        let name = std::path::Path::new(&f)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let Ok(cases) = maskbench::load_file(std::path::Path::new(&f)) else {
            println!("LOADERR {name}");
            continue;
        };
        for case in cases {
            let out = match constrain::schema::compile(&case.schema, &cfg.schema) {
                Ok(o) => o,
                Err(e) => {
                    println!("ERR {name} {e}");
                    continue;
                }
            };
            let re = regex_automata::meta::Regex::builder()
                .syntax(regex_automata::util::syntax::Config::new().nest_limit(10_000))
                .configure(
                    regex_automata::meta::Config::new()
                        .nfa_size_limit(Some(1 << 30))
                        .hybrid_cache_capacity(1 << 28),
                )
                .build(&format!("^(?:{})$", out.regex));
            let Ok(re) = re else {
                println!("SLOW {name} regex {} bytes", out.regex.len());
                continue;
            };
            let (mut vr, mut inv) = (0, 0);
            for t in &case.instances {
                let text = maskbench::python_dumps(&t.data);
                let m = re.is_match(&text);
                if t.valid && !m {
                    vr += 1;
                }
                if !t.valid && m {
                    inv += 1;
                }
            }
            if vr + inv == 0 {
                println!("ok {name}");
            } else {
                println!("VR {name} {vr} INV {inv}");
            }
        }
    }
}

//! What the model benches share: where the assets are, medians, and the
//! CPU time of the whole process (so that figures taken on a loaded machine
//! can be read next to the wall time).

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Instant;

/// `$CONSTRAIN_HOME`, else `~/.cache/constrain` (where `scripts/fetch-assets`
/// puts the tokenizer and models).
pub fn home() -> PathBuf {
    match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        }
    }
}

/// The median (upper middle for an even count); `v` must not be empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU seconds of all this process's threads (Linux; 0 elsewhere).
pub fn cpu() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>() as f64
        * 1e-9
}

/// Runs `f`, returns (wall ms, cpu ms, its result).
pub fn timed<T>(f: impl FnOnce() -> T) -> (f64, f64, T) {
    let (c, t) = (cpu(), Instant::now());
    let r = f();
    (t.elapsed().as_secs_f64() * 1e3, (cpu() - c) * 1e3, r)
}

/// The bench binary's command line. `cargo test --all-targets` runs bench
/// binaries without `--bench`: then [`Args::for_bench`] prints how to run
/// it and returns `None`.
pub struct Args(Vec<String>);

impl Args {
    pub fn for_bench(name: &str) -> Option<Args> {
        let args: Vec<String> = std::env::args().collect();
        if !args.iter().any(|a| a == "--bench") {
            println!("{name} bench: run it with `cargo bench --bench {name}`");
            return None;
        }
        Some(Args(args))
    }

    /// The text after `name`, if given.
    pub fn text(&self, name: &str) -> Option<String> {
        let i = self.0.iter().position(|a| a == name)?;
        self.0.get(i + 1).cloned()
    }

    /// The value after `name` parsed, else `default`.
    pub fn value<T: std::str::FromStr>(&self, name: &str, default: T) -> T {
        self.text(name)
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|a| a == name)
    }
}

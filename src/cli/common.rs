//! Shared CLI pieces: error reporting.

use std::process::ExitCode;

/// Prints one `error:` line (the error and its causes joined) and returns exit code 2.
pub fn report(e: &anyhow::Error) -> ExitCode {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    eprintln!("error: {}", msg.replace('\n', " "));
    ExitCode::from(2)
}

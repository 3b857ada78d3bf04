//! `rollstat probe`: the containers' health check (no curl needed).

use std::process::ExitCode;
use std::time::Duration;

/// GET `url`: exit 0 on a 2xx answer, 1 otherwise with the reason on stderr.
pub fn run(url: &str, timeout_ms: u64) -> ExitCode {
    match rollstat::probe::probe(url, Duration::from_millis(timeout_ms)) {
        Ok(code) => {
            println!("{url}: HTTP {code}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

//! `rollstat convert-mapping FILE`: the rules on stdout, or every problem
//! (with the file's line) on stderr and exit status 2.

use std::path::Path;
use std::process::ExitCode;

use rollstat::config::statsd_exporter::{self, ExporterRules};

pub fn run(file: &Path) -> ExitCode {
    let text = match rollstat::file::read_text(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    match statsd_exporter::parse(&text) {
        Ok(rules) => print_rules(file, &rules),
        Err(problems) => {
            let lines = problems
                .iter()
                .map(|p| {
                    format!(
                        "  {}:{}: `{}`: {}",
                        file.display(),
                        p.line,
                        p.key,
                        p.message
                    )
                })
                .collect();
            refuse(file, lines)
        }
    }
}

/// The rules as TOML, or the rules whose templates do not compile (a
/// problem too).
fn print_rules(file: &Path, rules: &ExporterRules) -> ExitCode {
    let bad: Vec<String> = rules
        .rules
        .iter()
        .filter_map(|r| {
            r.to_mapping()
                .err()
                .map(|e| format!("  {}:{}: {e}", file.display(), r.line))
        })
        .collect();
    if !bad.is_empty() {
        return refuse(file, bad);
    }
    print!("{}", rules.to_toml(file));
    for w in &rules.warnings {
        eprintln!("{}: warning: {w}", file.display());
    }
    ExitCode::SUCCESS
}

/// Every problem on stderr under one count, and exit status 2.
fn refuse(file: &Path, lines: Vec<String>) -> ExitCode {
    eprintln!("error: {} problem(s) in {}:", lines.len(), file.display());
    for line in lines {
        eprintln!("{line}");
    }
    ExitCode::from(2)
}

//! `rollstat man`: the man page (roff) on stdout, generated from the
//! command line's definitions (src/cli/args.rs).

use std::process::ExitCode;

use clap::CommandFactory;

use super::args::Cli;

pub fn run() -> ExitCode {
    match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write the man page to stdout: {e}");
            ExitCode::from(1)
        }
    }
}

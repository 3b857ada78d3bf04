//! `rollstat completions SHELL`: a shell completion script on stdout,
//! generated from the command line's definitions (src/cli/args.rs).

use std::process::ExitCode;

use clap::CommandFactory;

use super::args::Cli;

pub fn run(shell: clap_complete::Shell) -> ExitCode {
    clap_complete::generate(
        shell,
        &mut Cli::command(),
        "rollstat",
        &mut std::io::stdout(),
    );
    ExitCode::SUCCESS
}

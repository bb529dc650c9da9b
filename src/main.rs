//! The `tether` binary: parse the command line, run one command, map how it ended to
//! an exit code, in this one place. Everything else lives in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Error, Outcome};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::allocator::configure();
    match run(Cli::parse()) {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

fn run(cli: Cli) -> Result<Outcome, Error> {
    cli::init_logging(cli.log_format)?;
    // One TLS crypto provider for the whole process (DESIGN.md): ring. A second
    // install attempt only fails if one is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let outcome = runtime.block_on(cli::run(cli));
    // A blocking task still running (a Git fetch libgit2 will not interrupt) must not
    // hold the exit: `tether serve` promised to stop within its shutdown budget.
    runtime.shutdown_timeout(EXIT_GRACE);
    outcome
}

/// How long the exit waits for blocking tasks the command left behind.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

//! The `tether` binary: parse the command line, run one command, map its outcome to an
//! exit code. Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;
use tether::cli::{self, Cli};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(err) = cli::init_logging(cli.log_format) {
        eprintln!("error: {err:#}");
        return ExitCode::from(cli::EXIT_ERROR);
    }
    // One TLS crypto provider for the whole process (DESIGN.md): ring. A second
    // install attempt only fails if one is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(cli::EXIT_ERROR);
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

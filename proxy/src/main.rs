//! `idempotency-proxy`: the idempotency layer in front of any HTTP tool API or MCP server.
//!
//! ```text
//! idempotency-proxy --upstream http://127.0.0.1:8000 --listen 127.0.0.1:3000
//! ```
//!
//! A bad flag or configuration file exits with status 2 before anything starts; a store or
//! listener that cannot be reached at start exits with status 1. `idempotency-proxy inspect
//! <intent>` prints one intent's story from a running proxy's admin API instead.

mod admin;
mod answers;
mod body;
mod cli;
mod config;
mod forward;
mod inspect;
mod logs;
mod routes;
mod serve;
mod stack;
mod traced;
mod traces;
mod upstream;

use std::process::ExitCode;

use clap::Parser;
use tower_idempotency::store::redacted;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Some(cli::Command::Inspect(args)) = &cli.command {
        return inspect::run(args);
    }
    let config = match config::Config::load(&cli) {
        Ok(config) => config,
        Err(error) => {
            // A file's line is quoted as written: a store URL on it shows no password.
            eprintln!("idempotency-proxy: {}", redacted(&error.to_string()));
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("idempotency-proxy: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let traces = {
        let _entered = runtime.enter();
        traces::Traces::start(config.telemetry.otlp.as_ref())
    };
    let traces = match traces {
        Ok(traces) => traces,
        Err(error) => {
            eprintln!("idempotency-proxy: {error}");
            return ExitCode::FAILURE;
        }
    };
    logs::init(config.log_format, traces.tracer());
    let served = runtime.block_on(serve::run(config));
    // The spans of the last calls go out while the runtime still carries the exporter.
    traces.shutdown();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("idempotency-proxy: {}", redacted(&error));
            ExitCode::FAILURE
        }
    }
}

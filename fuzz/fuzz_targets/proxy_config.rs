//! The proxy's configuration file from arbitrary bytes, read as the proxy reads it (its own
//! `cli` and `config` modules, compiled here from its sources, load the file the flag names):
//! never panics, whatever the file holds.
#![no_main]

#[allow(dead_code, unreachable_pub, unused_imports)]
#[path = "../../proxy/src/cli.rs"]
mod cli;
#[allow(dead_code, unreachable_pub, unused_imports)]
#[path = "../../proxy/src/config/mod.rs"]
mod config;

use std::path::PathBuf;
use std::sync::OnceLock;

use clap::Parser;
use libfuzzer_sys::fuzz_target;

/// The file the input is written to, one per process.
fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let name = format!("proxy-config-fuzz-{}.toml", std::process::id());
        std::env::temp_dir().join(name)
    })
}

fuzz_target!(|data: &[u8]| {
    let path = file();
    std::fs::write(path, data).unwrap();
    let flags = ["idempotency-proxy", "--config", path.to_str().unwrap()];
    let cli = cli::Cli::try_parse_from(flags).unwrap();
    let _ = config::Config::load(&cli);
});

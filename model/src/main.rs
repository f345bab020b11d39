//! The exhaustive check `.ci/model` runs: every state within the model's bounds, breadth
//! first, then what held and how long it took. Exits non-zero when a property is broken or
//! never shown; with `--expect-broken WORD`, when no property whose name holds that word is
//! found broken (a revert switch's build must be caught).
//! `--quick` takes the bounds `cargo test` explores, `--revert` those a revert switch's check
//! explores; there, a `sometimes` state out of reach does not fail the check.

use std::process::ExitCode;

use tower_idempotency_model::report;
use tower_idempotency_model::{Bounds, StoreModel};

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let chosen = match args.first().map(String::as_str) {
        Some("--quick") => Some(Bounds::quick()),
        Some("--revert") => Some(Bounds::revert()),
        _ => None,
    };
    let small = chosen.is_some();
    if small {
        args.remove(0);
    }
    let expected = match args.as_slice() {
        [] => None,
        [flag, name] if flag == "--expect-broken" => Some(name.clone()),
        _ => {
            eprintln!("usage: model-check [--quick | --revert] [--expect-broken WORD]");
            return ExitCode::from(2);
        }
    };
    let bounds = chosen.unwrap_or_else(Bounds::exhaustive);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("bounds: {bounds}");
    println!("threads: {threads}");
    let checked = report::check(StoreModel::new(bounds), threads);
    print!("{checked}");
    let passed = match &expected {
        // Smaller bounds leave some `sometimes` states out of reach: only the full ones must
        // show them all.
        None if small => checked.broken.is_empty(),
        None => checked.holds(),
        Some(name) => checked
            .broken
            .iter()
            .any(|(broken, _)| broken.contains(name.as_str())),
    };
    if !passed {
        match expected {
            None => eprintln!("model check failed"),
            Some(name) => eprintln!("model check did not find \"{name}\" broken"),
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

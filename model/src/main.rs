//! The exhaustive check `.ci/model` runs: every state within the model's bounds, breadth
//! first, then what held and how long it took. Exits non-zero when a property is broken or
//! never shown; where `TOWER_IDEMPOTENCY_REVERT` picks a revert switch (in a build with them),
//! when the property that switch breaks is not found broken.
//! `--quick` takes the bounds `cargo test` explores, `--revert` those a revert switch's check
//! explores; there, a `sometimes` state out of reach does not fail the check. `--switches`
//! lists the revert switches.

use std::process::ExitCode;

use tower_idempotency_model::{report, revert};
use tower_idempotency_model::{Bounds, StoreModel};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bounds, small) = match args.as_slice() {
        [] => (Bounds::exhaustive(), false),
        [flag] if flag == "--quick" => (Bounds::quick(), true),
        [flag] if flag == "--revert" => (Bounds::revert(), true),
        [flag] if flag == "--switches" => {
            for (switch, _) in revert::SWITCHES {
                println!("{switch}");
            }
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("usage: model-check [--quick | --revert | --switches]");
            return ExitCode::from(2);
        }
    };
    let reverted = revert::chosen();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("bounds: {bounds}");
    println!("threads: {threads}");
    let checked = report::check(StoreModel::new(bounds), threads);
    print!("{checked}");
    let passed = match &reverted {
        Some((_, property)) => checked.broke(property),
        // Smaller bounds leave some `sometimes` states out of reach: only the full ones must
        // show them all.
        None if small => checked.broken.is_empty(),
        None => checked.holds(),
    };
    if !passed {
        match reverted {
            None => eprintln!("model check failed"),
            Some((switch, property)) => {
                eprintln!("model check did not find \"{property}\" broken under {switch}");
            }
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

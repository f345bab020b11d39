//! The model checked in seconds: every state within small bounds, then random traces that go
//! deeper, each on the crate's memory store. In a build with the revert switches compiled in
//! (`--cfg tower_idempotency_revert`), the one `TOWER_IDEMPOTENCY_REVERT` names must be found.

use tower_idempotency_model::properties::ALWAYS;
use tower_idempotency_model::walk::walk;
use tower_idempotency_model::{report, revert};
use tower_idempotency_model::{Bounds, StoreModel};

#[test]
fn every_state_within_small_bounds_keeps_every_property() {
    if revert::chosen().is_some() {
        return;
    }
    let checked = report::check(StoreModel::new(Bounds::quick()), 2);
    println!("{checked}");
    assert!(checked.unique_states > 1000, "{checked}");
    assert!(checked.broken.is_empty(), "{checked}");
    // What these bounds leave out (a lost claim answer, an operator) is shown by `.ci/model`.
    assert!(checked.never_seen.len() <= 3, "{checked}");
}

#[test]
fn random_traces_within_the_full_bounds_keep_every_property() {
    if revert::chosen().is_some() {
        return;
    }
    let model = StoreModel::new(Bounds::exhaustive());
    let walked = walk(&model, 56, 300);
    println!("{} traces, {} steps", walked.traces, walked.steps);
    assert_eq!(walked.traces, 300);
    assert!(
        walked.steps > 300 * 5,
        "traces of a few steps only: {walked:?}"
    );
    assert!(walked.counterexample.is_none(), "{walked:?}");
}

#[test]
fn the_reverted_bug_is_found_by_the_checker_and_by_random_traces() {
    let Some((switch, expected)) = revert::chosen() else {
        return;
    };
    let checked = report::check(StoreModel::new(Bounds::revert()), 2);
    println!("{checked}");
    assert!(checked.broke(expected), "{switch}: {checked}");
    let walked = walk(&StoreModel::new(Bounds::exhaustive()), 56, 300);
    let found = walked.counterexample.expect("random traces find it too");
    assert!(found.broken.contains(&expected), "{switch}: {found:?}");
}

#[test]
fn the_properties_are_named_apart() {
    let mut names: Vec<_> = ALWAYS.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ALWAYS.len());
}

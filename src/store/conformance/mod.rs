//! A conformance suite for [`Store`] implementations.
//!
//! The layer needs more of a store than its method signatures say: a claim is atomic and answers
//! who holds the intent, every write is fenced by the owner token, a lease that is not extended
//! lapses, records and tombstones expire, and what was kept comes back field for field.
//! [`check`] drives a store through each of these and reports every way it departs from them,
//! each [`Violation`] named by its check; [`assert_conforms`] panics with that list.
//!
//! A store written elsewhere (on Postgres, DynamoDB...) proves itself by running the suite in
//! its own tests, with this crate's `conformance` feature enabled in its dev-dependencies:
//!
//! ```no_run
//! # async fn run() {
//! use tower_idempotency::store::{conformance, MemoryStore};
//!
//! // In a `#[tokio::test]`, with your own store in place of this one.
//! let store = MemoryStore::new();
//! conformance::assert_conforms(&store).await;
//! # }
//! ```
//!
//! Every check runs on fresh random intent keys, so one store instance can run the suite, even
//! one that holds other data; it leaves a few entries behind that expire within a minute. The
//! timing checks wait with Tokio's timer and run concurrently: the suite takes about a second,
//! inside a Tokio runtime with its time driver (`#[tokio::test]` has one). Run it with time
//! running, not paused: a store that keeps real time (Redis) would fail a paused suite.
//!
//! The suite never repeats a write with the same arguments, so a store may answer such a repeat
//! `Held` (a retry whose reply was lost). Nor does it complete an intent whose lease lapsed or
//! was released while no other owner holds it: a store may keep or refuse that late record.

mod checks;
mod counting;
mod data;
mod expect;
mod operator;

use std::fmt;

use futures_util::future::{join_all, BoxFuture};

use super::{Fence, Store, StoreError};
use checks::*;
use counting::*;
use operator::*;

/// One way a store departs from what the layer needs of it.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The check that found it, e.g. `complete_under_a_wrong_token_is_fenced`.
    pub check: &'static str,
    /// What the store answered, and what it should have.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.check, self.detail)
    }
}

/// Runs each named check, concurrently, under its own name.
macro_rules! run_checks {
    ($store:ident; $($name:ident),+ $(,)?) => {
        join_all([$(
            Box::pin(async move {
                let mut this = Check::new(stringify!($name));
                // A check that stopped early has recorded why.
                let _ = $name($store, &mut this).await;
                this.found
            }) as BoxFuture<'_, Vec<Violation>>
        ),+])
    };
}

/// Runs every check against `store`, each on fresh keys, and returns every violation found.
pub async fn check<St: Store>(store: &St) -> Result<(), Vec<Violation>> {
    let found: Vec<Violation> = run_checks!(store;
        claim_acquires_a_free_intent,
        a_held_intent_answers_running_to_another_token,
        a_repeated_claim_with_the_same_token_acquires_again,
        complete_under_a_wrong_token_is_fenced,
        release_under_a_wrong_token_is_fenced,
        extend_under_a_wrong_token_is_fenced,
        abandon_under_a_wrong_token_is_fenced,
        a_full_response_is_kept_exactly,
        an_omitted_response_is_kept_exactly,
        an_abandoned_execution_is_kept_exactly,
        a_release_leaves_a_tombstone_that_never_blocks,
        a_completed_intent_fences_its_old_owner,
        a_released_intent_fences_its_old_owner,
        a_lease_that_is_not_extended_lapses,
        an_extended_lease_stays_held,
        a_record_expires_after_its_retention,
        a_tombstone_expires_after_its_ttl,
        abandon_frees_the_intent_at_once,
        distinct_keys_are_independent,
        calls_are_counted_per_intent_within_the_first_calls_window,
        counting_calls_leaves_the_intent_free,
        a_listing_finds_what_the_store_holds,
        a_listing_in_small_pages_finds_every_intent_once,
        a_removed_intent_runs_again_a_resolution_is_kept_and_a_lease_is_neither,
    )
    .await
    .into_iter()
    .flatten()
    .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(found)
    }
}

/// Runs [`check`] and panics with every violation it found, one a line.
pub async fn assert_conforms<St: Store>(store: &St) {
    if let Err(violations) = check(store).await {
        let list: String = violations.iter().map(|v| format!("\n  - {v}")).collect();
        panic!(
            "the store does not conform to what the layer needs ({} violations):{list}",
            violations.len()
        );
    }
}

/// A store call failed: the check ends there, its error recorded.
struct Stop;

/// One check as it runs: its name and what it found.
struct Check {
    name: &'static str,
    found: Vec<Violation>,
}

impl Check {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            found: Vec::new(),
        }
    }

    fn fail(&mut self, detail: impl Into<String>) {
        self.found.push(Violation {
            check: self.name,
            detail: detail.into(),
        });
    }

    /// The store's answer, or a stop with its error recorded.
    fn ok<T>(&mut self, when: &str, answer: Result<T, StoreError>) -> Result<T, Stop> {
        answer.map_err(|error| {
            self.fail(format!("{when}: the store failed: {error}"));
            Stop
        })
    }

    /// Records a fenced write that answered other than `want`.
    fn fence(
        &mut self,
        when: &str,
        answer: Result<Fence, StoreError>,
        want: Fence,
    ) -> Result<(), Stop> {
        let got = self.ok(when, answer)?;
        if got != want {
            self.fail(format!("{when}: answered {got:?}, expected {want:?}"));
        }
        Ok(())
    }

    /// Records the fields that came back other than they went in.
    fn same(&mut self, when: &str, off: Vec<String>) {
        if !off.is_empty() {
            self.fail(format!("{when}: {}", off.join("; ")));
        }
    }
}

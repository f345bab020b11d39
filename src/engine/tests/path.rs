//! The engine on its own, without HTTP: a dialect of the tests' own, whose tool answers a
//! string after a while and whose reading of it is given, drives [`Engine::begin`] and the
//! path after it on Tokio's paused clock.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use tokio::time::Instant;

use super::TestStore;
use crate::classify::Verdict;
use crate::engine::{
    Beginning, Call, Decision, Engine, Failure, Judgement, Outcome, Reading, Refusal, ToolAnswer,
    UnprotectedCause,
};
use crate::store::{MemoryStore, ReleaseCause, Store, StoredResponse};
use crate::IdempotencyLayer;

/// How the tests' tool answers: after `took`, read as `verdict`, or by panicking after a
/// second.
#[derive(Clone, Copy)]
enum Tool {
    Answers { took: Duration, verdict: Verdict },
    Panics,
}

fn answers(took_s: u64) -> Tool {
    Tool::Answers {
        took: Duration::from_secs(took_s),
        verdict: Verdict::Keep,
    }
}

/// One layer's engine and the count of its tool's runs.
struct Harness<St> {
    engine: Arc<Engine<St>>,
    runs: Arc<AtomicUsize>,
}

impl<St: Store> Harness<St> {
    fn new(layer: &IdempotencyLayer<St>) -> Self {
        let engine = Engine::new(Arc::clone(&layer.settings), Arc::clone(&layer.runtime));
        Self {
            engine: Arc::new(engine),
            runs: Arc::default(),
        }
    }

    /// Another instance over the same store, sharing the count of runs.
    fn beside(&self, layer: &IdempotencyLayer<St>) -> Self {
        Self {
            runs: Arc::clone(&self.runs),
            ..Self::new(layer)
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// One call of the same intent, answered by `tool`: what the engine decided.
    async fn call(&self, tool: Tool) -> Outcome<String> {
        let parts = Request::post("/tools/send")
            .header("x-session-id", "s1")
            .header("content-type", "application/json")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let scope = self
            .engine
            .settings
            .scope
            .scope_of(&parts)
            .unwrap()
            .unwrap();
        let op = self.engine.runtime.ops.unscoped();
        let runs = Arc::clone(&self.runs);
        let work = move |_, _| async move {
            let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
            match tool {
                Tool::Panics => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    panic!("the tool crashed")
                }
                Tool::Answers { took, verdict } => {
                    tokio::time::sleep(took).await;
                    Ok::<_, Infallible>(answer(format!("run {run}"), verdict))
                }
            }
        };
        let body = Bytes::from_static(br#"{"to":"a@example.com"}"#);
        let begun = self
            .engine
            .begin(parts, body, &scope, &op, Call::default(), work);
        let decided = match begun {
            Beginning::Decided(decided) => decided,
            Beginning::Running(running) => running.await.unwrap(),
        };
        match decided {
            Decision::Keyed { outcome, .. } => outcome,
            Decision::Refused(refusal) => Outcome::NotExecuted(refusal),
        }
    }
}

/// The tests' dialect reading the tool's `text`, judged `verdict`.
fn answer(text: String, verdict: Verdict) -> Reading<String> {
    let stored = StoredResponse {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: Bytes::from(text.clone()),
    };
    Reading::Answered(ToolAnswer {
        judged: Judgement::Verdict(verdict),
        stored: Some(stored),
        status: Some(StatusCode::OK),
        retry_after_s: None,
        answer: text,
    })
}

fn replayed_body(outcome: &Outcome<String>) -> Option<Bytes> {
    match outcome {
        Outcome::Replayed(record) => match &record.response {
            crate::store::KeptResponse::Full(stored) => Some(stored.body.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_first_call_runs_and_a_repeat_is_replayed_without_running() {
    let harness = Harness::new(&IdempotencyLayer::new());
    let first = harness.call(answers(1)).await;
    assert!(
        matches!(&first, Outcome::Executed(text) if text == "run 1"),
        "{first:?}"
    );
    let repeat = harness.call(answers(1)).await;
    assert_eq!(replayed_body(&repeat).as_deref(), Some(&b"run 1"[..]));
    assert_eq!(harness.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn duplicates_in_process_wait_on_the_leader_and_share_its_outcome() {
    let harness = Harness::new(&IdempotencyLayer::new());
    let started = Instant::now();
    let calls = (0..3).map(|_| harness.call(answers(2)));
    let outcomes = futures_util::future::join_all(calls).await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "none waited longer"
    );
    assert_eq!(harness.runs(), 1);
    let executed = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Executed(_)));
    assert_eq!(executed.count(), 1);
    let replays = outcomes.iter().filter_map(replayed_body);
    assert!(replays.map(|body| body == "run 1").eq([true, true]));
}

#[tokio::test(start_paused = true)]
async fn past_its_deadline_a_caller_is_told_in_progress_while_the_execution_goes_on() {
    let layer = IdempotencyLayer::new().deadline(Duration::from_secs(1));
    let harness = Harness::new(&layer);
    let started = Instant::now();
    let first = harness.call(answers(5)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert!(
        matches!(
            first,
            Outcome::InProgress {
                duplicate: false,
                ..
            }
        ),
        "{first:?}"
    );
    let duplicate = harness.call(answers(5)).await;
    assert!(
        matches!(
            duplicate,
            Outcome::InProgress {
                duplicate: true,
                ..
            }
        ),
        "{duplicate:?}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = harness.call(answers(5)).await;
    assert_eq!(replayed_body(&later).as_deref(), Some(&b"run 1"[..]));
    assert_eq!(harness.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_released_outcome_is_its_callers_answer_and_the_next_call_runs() {
    let harness = Harness::new(&IdempotencyLayer::new());
    let released = Tool::Answers {
        took: Duration::from_secs(1),
        verdict: Verdict::Release(ReleaseCause::Status),
    };
    let (first, waiter) = tokio::join!(harness.call(released), harness.call(released));
    assert!(
        matches!(&first, Outcome::Executed(text) if text == "run 1"),
        "{first:?}"
    );
    // The duplicate that waited is handed the failed answer, not run again.
    assert!(
        matches!(&waiter, Outcome::Failed { answer: Some(stored), .. } if stored.body == "run 1"),
        "{waiter:?}"
    );
    let retry = harness.call(answers(1)).await;
    assert!(
        matches!(&retry, Outcome::Executed(text) if text == "run 2"),
        "{retry:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_panics_is_told_may_have_run_to_its_caller_and_its_duplicates() {
    let harness = Harness::new(&IdempotencyLayer::new());
    let (first, duplicate) = tokio::join!(harness.call(Tool::Panics), harness.call(Tool::Panics));
    for outcome in [&first, &duplicate] {
        assert!(
            matches!(
                outcome,
                Outcome::Failed {
                    failure: Failure::Panic,
                    ..
                }
            ),
            "{outcome:?}"
        );
    }
    assert_eq!(harness.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn another_instance_replays_a_kept_outcome_and_waits_on_a_running_one() {
    let store = MemoryStore::new();
    let one = IdempotencyLayer::with_store(store.clone()).deadline(Duration::from_secs(1));
    let other = IdempotencyLayer::with_store(store).deadline(Duration::from_secs(1));
    let here = Harness::new(&one);
    let there = here.beside(&other);
    // Running here past its caller's deadline: the other instance waits on it, runs nothing.
    let first = here.call(answers(3)).await;
    assert!(matches!(first, Outcome::InProgress { .. }), "{first:?}");
    let meanwhile = there.call(answers(3)).await;
    assert!(
        matches!(
            meanwhile,
            Outcome::InProgress {
                duplicate: true,
                ..
            }
        ),
        "{meanwhile:?}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = there.call(answers(3)).await;
    assert_eq!(replayed_body(&after).as_deref(), Some(&b"run 1"[..]));
    assert_eq!(here.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_lease_is_renewed_for_as_long_as_the_execution_runs() {
    let store = MemoryStore::new();
    let lease = Duration::from_secs(3);
    let one = IdempotencyLayer::with_store(store.clone())
        .lease(lease)
        .deadline(Duration::ZERO);
    let other = IdempotencyLayer::with_store(store)
        .lease(lease)
        .deadline(Duration::from_secs(1));
    let here = Harness::new(&one);
    let there = here.beside(&other);
    here.call(answers(60)).await;
    // Twenty leases later, the claim still holds: the other instance runs nothing.
    tokio::time::sleep(Duration::from_secs(58)).await;
    let meanwhile = there.call(answers(60)).await;
    assert!(
        matches!(meanwhile, Outcome::InProgress { .. }),
        "{meanwhile:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = there.call(answers(60)).await;
    assert_eq!(replayed_body(&after).as_deref(), Some(&b"run 1"[..]));
    assert_eq!(here.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_claim_the_store_cannot_answer_runs_nothing_unless_the_layer_fails_open() {
    let closed = Harness::new(&IdempotencyLayer::with_store(
        TestStore::default().claims_fail(),
    ));
    let refused = closed.call(answers(1)).await;
    assert!(
        matches!(refused, Outcome::NotExecuted(Refusal::StoreUnavailable)),
        "{refused:?}"
    );
    assert_eq!(closed.runs(), 0);
    // Failing open, it runs unprotected, and its duplicates here still wait for that run.
    let open =
        Harness::new(&IdempotencyLayer::with_store(TestStore::default().claims_fail()).fail_open());
    let calls = (0..3).map(|_| open.call(answers(1)));
    let outcomes = futures_util::future::join_all(calls).await;
    assert_eq!(open.runs(), 1);
    let unprotected = outcomes.iter().filter(|o| {
        matches!(
            o,
            Outcome::Unprotected(_, UnprotectedCause::StoreUnavailable)
        )
    });
    assert_eq!(unprotected.count(), 1, "{outcomes:?}");
}

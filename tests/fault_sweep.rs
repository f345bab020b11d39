//! Every fault in every store call: for a first execution, a coalesced duplicate, a replay, a
//! status query and an execution that fails for real, each store call (claim, complete, release, extend, get) fails, fails after
//! reaching the store, hangs, answers late or panics, at its first or second use. Over the
//! memory store and a real Redis, every case must hold
//! the promise:
//!
//! - at most one execution per intent;
//! - every caller answered within its deadline, plus the store timeout, plus 0.5 s;
//! - no answer says "not executed" of an attempt that ran, nor "running" or "done" of an
//!   action that never ran.

mod support;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use support::faulty::{Call, Fault, FaultyStore, Plan};
use support::{serve, Answer, Client, Counts};
use tower_idempotency::store::{MemoryStore, Store};
use tower_idempotency::IdempotencyLayer;

const DEADLINE: Duration = Duration::from_millis(400);
const STORE_TIMEOUT: Duration = Duration::from_millis(300);
const SLACK: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy)]
enum Scenario {
    FirstExecution,
    CoalescedDuplicate,
    Replay,
    StatusQuery,
    /// The tool fails for real (503): the intent is released, and asked about.
    FailedExecution,
}

const SCENARIOS: [Scenario; 5] = [
    Scenario::FirstExecution,
    Scenario::CoalescedDuplicate,
    Scenario::Replay,
    Scenario::StatusQuery,
    Scenario::FailedExecution,
];

/// A tool that records which attempt ran it: `attempt` is left out of the key.
async fn act(State(counts): State<Counts>, Json(body): Json<Value>) -> Json<Value> {
    counts.bump("executions");
    counts.bump(&format!("attempt:{}", body["attempt"]));
    tokio::time::sleep(Duration::from_millis(450)).await;
    Json(json!({ "done": true }))
}

/// The same tool, failing for real after it ran.
async fn fail(State(counts): State<Counts>, Json(body): Json<Value>) -> axum::http::StatusCode {
    counts.bump("executions");
    counts.bump(&format!("attempt:{}", body["attempt"]));
    tokio::time::sleep(Duration::from_millis(100)).await;
    axum::http::StatusCode::SERVICE_UNAVAILABLE
}

/// What one answer claims about the action.
#[derive(Debug, PartialEq)]
enum Claims {
    Done,
    Running,
    NotExecuted,
    /// "may have run", "failed", "cannot tell", "not found": nothing it could be wrong about
    /// here.
    Other,
}

fn claims(answer: &Answer) -> Claims {
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    if body["done"] == true {
        return Claims::Done;
    }
    match body["outcome"].as_str() {
        Some("in_progress") => Claims::Running,
        Some("not_executed") => Claims::NotExecuted,
        Some("already_executed") => Claims::Done,
        _ => Claims::Other,
    }
}

struct Case {
    scenario: Scenario,
    plan: Plan,
}

/// Runs one case over `store` and returns what broke, if anything.
async fn run<St: Store>(case: &Case, store: St, id: usize, in_memory: bool) -> Result<(), String> {
    let counts = Counts::default();
    let store = FaultyStore::new(store, Some(case.plan));
    let layer = IdempotencyLayer::with_store(store)
        .ignore_field("/attempt")
        .deadline(DEADLINE)
        .store_timeout(STORE_TIMEOUT)
        // Longer than a case: a lease nobody owns would still hold when the repeat comes.
        .lease(Duration::from_millis(1200));
    let app = Router::new()
        .route("/act", post(act))
        .route("/fail", post(fail))
        .with_state(counts.clone())
        .layer(layer);
    let client = if in_memory {
        Client::in_memory(app)
    } else {
        Client::new(serve(app).await)
    };
    let path = match case.scenario {
        Scenario::FailedExecution => "/fail",
        _ => "/act",
    };
    let call = |attempt: usize| {
        let client = client.clone();
        async move {
            let body = format!(r#"{{"id":{id},"attempt":{attempt}}}"#);
            let asked = Instant::now();
            let answer = client.post(path, "s", &body).await;
            (attempt, asked.elapsed(), answer)
        }
    };
    let mut answers = Vec::new();
    match case.scenario {
        Scenario::FirstExecution => answers.push(call(1).await),
        Scenario::CoalescedDuplicate => {
            let second = async {
                // A fault may keep the first from running at all: no count to wait for.
                tokio::time::sleep(Duration::from_millis(30)).await;
                call(2).await
            };
            let (a, b) = tokio::join!(call(1), second);
            answers.extend([a, b]);
        }
        Scenario::Replay => {
            answers.push(call(1).await);
            tokio::time::sleep(Duration::from_millis(150)).await;
            answers.push(call(2).await);
        }
        Scenario::StatusQuery | Scenario::FailedExecution => {
            let first = call(1).await;
            let url = format!("/_idempotency/{}", first.2.intent());
            answers.push(first);
            tokio::time::sleep(Duration::from_millis(150)).await;
            let asked = Instant::now();
            let status = client.get(&url, Some("s")).await;
            answers.push((0, asked.elapsed(), status));
        }
    }
    // Let every detached execution end before counting.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let executions = counts.get("executions");
    if executions > 1 {
        return Err(format!("{executions} executions of one intent"));
    }
    for (attempt, took, answer) in &answers {
        if *took > DEADLINE + STORE_TIMEOUT + SLACK {
            return Err(format!("attempt {attempt} answered after {took:?}"));
        }
        let ran = counts.get(&format!("attempt:{attempt}")) > 0;
        match claims(answer) {
            Claims::NotExecuted if ran => {
                return Err(format!("attempt {attempt} ran but was told not executed"))
            }
            Claims::Running | Claims::Done if executions == 0 => {
                let status = answer.status;
                return Err(format!(
                    "attempt {attempt} was told {:?} ({status}) of an action that never ran",
                    claims(answer)
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for scenario in SCENARIOS {
        for call in Call::ALL {
            for fault in Fault::ALL {
                for ordinal in 0..2 {
                    let plan = Plan {
                        call,
                        ordinal,
                        fault,
                        every: false,
                    };
                    cases.push(Case { scenario, plan });
                }
            }
        }
    }
    cases
}

/// Keeps the injected panics out of the test's output; any other panic is reported as usual.
fn quiet_injected_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let injected = info
            .payload()
            .downcast_ref::<&str>()
            .is_some_and(|message| message.starts_with("injected"));
        if !injected {
            report(info);
        }
    }));
}

/// Runs every case, a batch at a time, over a store made by `store`; over the in-memory pipe
/// (for the paused clock) or loopback.
async fn sweep<St: Store, F: Fn() -> St>(store: F, name: &str, in_memory: bool) {
    quiet_injected_panics();
    let cases = cases();
    let mut failures = Vec::new();
    let next_id = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for batch in cases.chunks(25) {
        let runs = batch.iter().map(|case| {
            let id = next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let store = store();
            async move { (case, run(case, store, id, in_memory).await) }
        });
        for (case, outcome) in futures_util::future::join_all(runs).await {
            if let Err(broken) = outcome {
                failures.push(format!("{:?} {:?}: {broken}", case.scenario, case.plan));
            }
        }
    }
    println!(
        "{name}: {} fault cases ran, {} broke the promise",
        cases.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

#[tokio::test(start_paused = true)]
async fn every_fault_in_every_memory_store_call_keeps_the_promise() {
    sweep(MemoryStore::new, "memory store", true).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_in_every_redis_store_call_keeps_the_promise() {
    let server = support::redis_server::RedisServer::start();
    let store = tower_idempotency::store::RedisStore::connect(&server.url())
        .await
        .expect("the test's redis-server");
    sweep(|| store.clone(), "redis store", false).await;
}

//! Metrics per operation through the `metrics` facade, read back with a debugging recorder.

mod support;

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::recorded::{counter, gauge, histogram};
use support::{start, start_in_memory, tools, Client, Counts};
use tower_idempotency::IdempotencyLayer;

#[tokio::test]
async fn metrics_count_executions_replays_and_attempts_per_operation() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let layer = IdempotencyLayer::new().deadline(Duration::from_millis(50));
    let executions = layer.detached();
    let (client, _) = start(layer).await;

    for _ in 0..3 {
        client.post("/tools/echo", "s", r#"{"a":1}"#).await;
    }
    client.post("/tools/echo", "s", r#"{"a":2}"#).await;
    client.post("/tools/echo", "s", r#"{"delay_ms":200}"#).await;
    client.post("/tools/status/503", "s", "{}").await;
    client.post("/tools/echo", "", "{}").await;
    executions.wait().await;

    // One snapshot: taking it drains what it read.
    let snapshot = snapshotter.snapshot().into_vec();
    let echo = [("operation", "POST /tools/echo")];
    assert_eq!(counter(&snapshot, "idempotency_executions_total", &echo), 3);
    assert_eq!(counter(&snapshot, "idempotency_replays_total", &echo), 2);
    assert_eq!(
        counter(&snapshot, "idempotency_in_progress_total", &echo),
        1
    );
    assert_eq!(
        counter(
            &snapshot,
            "idempotency_not_executed_total",
            &[("reason", "missing-scope")]
        ),
        1
    );
    assert_eq!(
        counter(
            &snapshot,
            "idempotency_releases_total",
            &[("operation", "POST /tools/status/:id"), ("cause", "status")]
        ),
        1
    );
    let class = |c| counter(&snapshot, "idempotency_requests_total", &[("class", c)]);
    assert_eq!((class("2xx"), class("4xx"), class("5xx")), (5, 1, 1));
    let mut attempts = histogram(&snapshot, "idempotency_intent_attempts", &[]);
    attempts.sort_by(f64::total_cmp);
    assert_eq!(
        attempts,
        [1.0, 1.0, 1.0, 1.0, 2.0, 3.0],
        "one intent was asked for 3 times"
    );
    assert!(!histogram(&snapshot, "idempotency_store_duration_seconds", &[]).is_empty());
    assert!(!histogram(&snapshot, "idempotency_request_duration_seconds", &[]).is_empty());
}

/// A word of letters only, so the default route label does not mask it as an id.
fn word(mut n: usize) -> String {
    let mut word = String::new();
    loop {
        word.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
        if n == 0 {
            return word;
        }
    }
}

#[tokio::test]
async fn a_flood_of_distinct_paths_cannot_grow_the_operation_labels_past_their_bound() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let layer = IdempotencyLayer::new();
    let (client, _) = start(layer).await;
    // Without a scope nothing is labelled per path; with one, past the bound, one overflow label.
    for n in 0..100 {
        client.post(&format!("/x/{}", word(n)), "", "{}").await;
    }
    for n in 0..700 {
        client.post(&format!("/x/{}", word(n)), "s", "{}").await;
    }
    let snapshot = snapshotter.snapshot().into_vec();
    let labels: std::collections::HashSet<String> = snapshot
        .iter()
        .flat_map(|(key, ..)| key.key().labels())
        .filter(|label| label.key() == "operation")
        .map(|label| label.value().to_owned())
        .collect();
    let bound = tower_idempotency::MAX_OPERATIONS + 2; // and `(other)`, `(no scope)`
    assert!(labels.len() <= bound, "{} operation labels", labels.len());
    assert!(labels.contains("(other)"), "the rest share one label");
    assert_eq!(
        counter(&snapshot, "idempotency_requests_total", &[]),
        800,
        "every request is still counted"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_taken_over_while_the_action_runs_is_counted_as_lost() {
    use support::faulty::{Call, Fault, FaultyStore, Plan};
    use tower_idempotency::store::MemoryStore;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::new();
    // This instance's renewals reach the store too late, after the lease lapsed.
    let late = Plan {
        call: Call::Extend,
        ordinal: 0,
        fault: Fault::Delay(Duration::from_millis(400)),
        every: true,
    };
    let stalled = IdempotencyLayer::with_store(FaultyStore::new(store.clone(), Some(late)))
        .lease(Duration::from_millis(120))
        .deadline(Duration::from_millis(100));
    let other = IdempotencyLayer::with_store(store).deadline(Duration::from_millis(100));
    let counts = Counts::default();
    let first = Client::in_memory(tools(counts.clone()).layer(stalled));
    let second = Client::in_memory(tools(counts.clone()).layer(other));
    let slow = r#"{"id":1,"delay_ms":900}"#;
    first.post("/tools/intent", "s", slow).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The lease lapsed: the other instance takes the intent over, and runs it again.
    second.post("/tools/intent", "s", slow).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let snapshot = snapshotter.snapshot().into_vec();
    assert!(
        counter(&snapshot, "idempotency_lease_lost_total", &[]) >= 1,
        "the stalled owner learned that its lease was taken over"
    );
    assert_eq!(
        counts.get("intent:1"),
        2,
        "what a lost lease costs: a second run"
    );
}

#[tokio::test]
async fn evictions_are_counted_by_their_cause() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    // Room for a few records in all, and for fewer of any one session's; every record may go
    // for room once kept.
    let store = tower_idempotency::store::MemoryStore::builder()
        .max_bytes(8 * 1024)
        .max_bytes_per_scope(3 * 1024)
        .min_retention(Duration::ZERO)
        .build();
    let layer = IdempotencyLayer::with_store(store.clone());
    let (client, _) = start(layer).await;

    // Each snapshot takes the counts since the one before.
    let evicted_since = || {
        let snapshot = snapshotter.snapshot().into_vec();
        let evicted = |cause| {
            counter(
                &snapshot,
                "idempotency_evictions_total",
                &[("cause", cause)],
            )
        };
        (evicted("scope_share"), evicted("budget"))
    };

    // One session past its share, never near the whole budget: every eviction is the share's.
    for n in 0..12 {
        client
            .post("/tools/raw", "one", &format!(r#"{{"n":{n}}}"#))
            .await;
    }
    let over_share = store.evictions();
    assert!(over_share > 0, "the share was passed");
    assert_eq!(evicted_since(), (over_share, 0));

    // Then many sessions of one record each, within their shares: every eviction since is the
    // whole budget's.
    for n in 0..24 {
        let session = format!("session-{n}");
        client.post("/tools/raw", &session, r#"{"n":0}"#).await;
    }
    let over_budget = store.evictions() - over_share;
    assert!(over_budget > 0, "the budget was passed");
    assert_eq!(evicted_since(), (0, over_budget));
}

#[tokio::test]
async fn new_intents_a_full_store_refuses_are_counted_apart_from_store_errors() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    // Every record is kept for its minimum retention: a few sessions fill the budget.
    let store = tower_idempotency::store::MemoryStore::builder()
        .max_bytes(8 * 1024)
        .build();
    let (client, counts) = start(IdempotencyLayer::with_store(store)).await;
    let registered = snapshotter.snapshot().into_vec();
    let full = registered
        .iter()
        .find(|(key, ..)| key.key().name() == "idempotency_store_full_total");
    assert!(
        matches!(full, Some((.., DebugValue::Counter(0)))),
        "registered at zero with the layer: {full:?}"
    );
    let mut refused = 0;
    for n in 0..24 {
        let answer = client.post("/tools/raw", &format!("s{n}"), "{}").await;
        refused += u64::from(answer.status == 503);
    }
    assert!(refused > 0, "the budget was passed");
    assert_eq!(counts.get("raw"), 24 - refused as usize);
    let snapshot = snapshotter.snapshot().into_vec();
    assert_eq!(
        counter(&snapshot, "idempotency_store_full_total", &[]),
        refused
    );
    assert_eq!(
        counter(
            &snapshot,
            "idempotency_not_executed_total",
            &[("reason", "store-full")]
        ),
        refused
    );
    assert_eq!(counter(&snapshot, "idempotency_store_errors_total", &[]), 0);
}

#[tokio::test]
async fn the_memory_store_bytes_gauge_follows_what_it_keeps_up_to_its_budget() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let budget = 8 * 1024;
    let store = tower_idempotency::store::MemoryStore::builder()
        .max_bytes(budget)
        .max_bytes_per_scope(budget)
        .build();
    let layer = IdempotencyLayer::with_store(store.clone());
    let (client, _) = start(layer).await;

    client.post("/tools/raw", "s", r#"{"n":0}"#).await;
    let kept_one = store.weighted_size();
    assert!(kept_one > 0);
    let snapshot = snapshotter.snapshot().into_vec();
    assert_eq!(
        gauge(&snapshot, "idempotency_memory_store_bytes"),
        kept_one as f64
    );

    // Past the budget: the gauge follows the evictions down to what is kept.
    for n in 1..40 {
        client
            .post("/tools/raw", "s", &format!(r#"{{"n":{n}}}"#))
            .await;
    }
    assert!(store.evictions() > 0, "the budget was passed");
    let snapshot = snapshotter.snapshot().into_vec();
    let kept = gauge(&snapshot, "idempotency_memory_store_bytes");
    assert_eq!(kept, store.weighted_size() as f64);
    assert!(kept <= budget as f64, "{kept} kept against {budget}");
}

#[tokio::test(start_paused = true)]
async fn a_claim_given_back_is_timed_as_an_abandon_not_as_an_extend() {
    use support::faulty::{Call, Fault, FaultyStore, Plan};
    use tower_idempotency::store::MemoryStore;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    // The claim reaches the store and its answer is lost: the lease it took is given back.
    let lost = Plan {
        call: Call::Claim,
        ordinal: 0,
        fault: Fault::FailAfter,
        every: false,
    };
    let store = FaultyStore::new(MemoryStore::new(), Some(lost));
    let (client, _) = start_in_memory(IdempotencyLayer::with_store(store));
    assert_eq!(client.post("/tools/echo", "s", "{}").await.status, 503);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let snapshot = snapshotter.snapshot().into_vec();
    let timed = |call| {
        histogram(
            &snapshot,
            "idempotency_store_duration_seconds",
            &[("call", call)],
        )
        .len()
    };
    assert_eq!((timed("abandon"), timed("extend")), (1, 0));
}

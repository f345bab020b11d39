//! Observe mode: every call of a protected route is keyed and counted, and passed to the tool
//! as it came; nothing is refused, replayed, coalesced or rewritten.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use metrics_util::debugging::{DebuggingRecorder, Snapshotter};
use support::faulty::{Call, Fault, FaultyStore, Plan};
use support::recorded::{counter, histogram, Snapshot};
use support::{start_in_memory, tools, Client, Counts};
use tower_idempotency::store::MemoryStore;
use tower_idempotency::IdempotencyLayer;

const CHECKS: &str = "idempotency_duplicate_checks_total";
const ECHO: (&str, &str) = ("operation", "POST /tools/echo");

/// What was recorded once every count has been made: a count the store does not answer at
/// once is made in a task of its own, bounded by the store timeout (2 s), so on the paused
/// clock five seconds see them all. A snapshot takes what it reads: one a test.
async fn recorded(snapshotter: &Snapshotter) -> Snapshot {
    tokio::time::sleep(Duration::from_secs(5)).await;
    snapshotter.snapshot().into_vec()
}

/// The checks counted for `operation`, by result: first, repeat, not keyable, uncounted.
fn checks(snapshot: &Snapshot, operation: (&str, &str)) -> [u64; 4] {
    ["first", "repeat", "not_keyable", "uncounted"]
        .map(|result| counter(snapshot, CHECKS, &[operation, ("result", result)]))
}

#[tokio::test(start_paused = true)]
async fn every_call_reaches_the_tool_and_repeats_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (client, counts) = start_in_memory(IdempotencyLayer::new().observe());
    for n in 1..=3 {
        let answer = client.post("/tools/echo", "s", r#"{"to":"a"}"#).await;
        assert_eq!(answer.status, StatusCode::CREATED);
        assert_eq!(answer.json()["n"], n, "the tool's own answer, every time");
        assert_eq!(answer.header("idempotency-intent"), None, "nothing added");
        assert!(!answer.replayed());
    }
    // The same intent spelled otherwise is the same intent; another session is another.
    client.post("/tools/echo", "s", r#"{ "to" : "a" }"#).await;
    client.post("/tools/echo", "t", r#"{"to":"a"}"#).await;
    assert_eq!(counts.get("echo"), 5, "every call ran");
    let snapshot = recorded(&snapshotter).await;
    assert_eq!(checks(&snapshot, ECHO), [2, 3, 0, 0]);
    let outcome = |outcome| {
        counter(
            &snapshot,
            "idempotency_outcomes_total",
            &[ECHO, ("outcome", outcome)],
        )
    };
    assert_eq!((outcome("observed"), outcome("executed")), (5, 0));
    let mut attempts = histogram(&snapshot, "idempotency_duplicate_attempts", &[ECHO]);
    attempts.sort_by(f64::total_cmp);
    assert_eq!(attempts, [1.0, 1.0, 2.0, 3.0, 4.0]);
}

#[tokio::test(start_paused = true)]
async fn concurrent_duplicates_all_run_and_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (client, counts) = start_in_memory(IdempotencyLayer::new().observe());
    let calls = (0..5).map(|_| client.post("/tools/echo", "s", r#"{"delay_ms":500}"#));
    for answer in futures_util::future::join_all(calls).await {
        assert_eq!(answer.status, StatusCode::CREATED);
    }
    assert_eq!(counts.get("echo"), 5, "nothing coalesced");
    assert_eq!(checks(&recorded(&snapshotter).await, ECHO), [1, 4, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn failures_are_passed_on_and_a_retry_after_one_counts_as_a_repeat() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (client, counts) = start_in_memory(IdempotencyLayer::new().observe());
    for _ in 0..2 {
        let answer = client.post("/tools/status/503", "s", "{}").await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.json()["status"], 503, "the tool's own body");
    }
    assert_eq!(counts.get("status"), 2);
    let operation = ("operation", "POST /tools/status/:id");
    assert_eq!(
        checks(&recorded(&snapshotter).await, operation),
        [1, 1, 0, 0]
    );
}

#[tokio::test(start_paused = true)]
async fn calls_that_cannot_be_keyed_are_passed_on_and_counted_as_not_keyable() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let layer = IdempotencyLayer::new().observe().body_limit(64);
    let (client, counts) = start_in_memory(layer);
    // No session: enforcing would refuse it.
    let anonymous = client
        .post_with("/tools/echo", &[("content-type", "application/json")], "{}")
        .await;
    assert_eq!(anonymous.status, StatusCode::CREATED);
    // A body over the limit, declared: passed on unread, whole.
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(200));
    let over = client.post("/tools/echo", "s", &big).await;
    assert_eq!(over.status, StatusCode::CREATED);
    assert_eq!(over.json()["echo"]["pad"].as_str().unwrap().len(), 200);
    // The same, streamed with no length: read, and passed on whole.
    let chunks = [big.clone().into_bytes()];
    let streamed = client
        .post_with(
            "/tools/echo",
            &[("x-session-id", "s"), ("content-type", "application/json")],
            reqwest::Body::wrap_stream(futures_util::stream::iter(
                chunks.map(Ok::<_, std::io::Error>),
            )),
        )
        .await;
    assert_eq!(streamed.status, StatusCode::CREATED);
    assert_eq!(streamed.json()["echo"]["pad"].as_str().unwrap().len(), 200);
    assert_eq!(counts.get("echo"), 3);
    // With no length, past four times the limit: not held, and nothing whole to pass on.
    let huge = format!(r#"{{"pad":"{}"}}"#, "x".repeat(400));
    let refused = client
        .post_with(
            "/tools/echo",
            &[("x-session-id", "s"), ("content-type", "application/json")],
            reqwest::Body::wrap_stream(futures_util::stream::iter([Ok::<_, std::io::Error>(
                huge.into_bytes(),
            )])),
        )
        .await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(refused.json()["outcome"], "not_executed");
    assert_eq!(counts.get("echo"), 3, "nothing ran");
    let snapshot = recorded(&snapshotter).await;
    assert_eq!(checks(&snapshot, ("operation", "(no scope)")), [0, 0, 1, 0]);
    assert_eq!(checks(&snapshot, ECHO), [0, 0, 3, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_cannot_count_changes_nothing_but_the_count() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    for fault in [
        Fault::Fail,
        Fault::Hang(Duration::from_secs(60)),
        Fault::Panic,
    ] {
        let plan = Plan {
            call: Call::Count,
            ordinal: 0,
            fault,
            every: true,
        };
        let store = FaultyStore::new(MemoryStore::new(), Some(plan));
        let (client, counts) = start_in_memory(IdempotencyLayer::with_store(store).observe());
        let started = tokio::time::Instant::now();
        let answer = client.post("/tools/echo", "s", "{}").await;
        assert_eq!(answer.status, StatusCode::CREATED, "{fault:?}");
        assert_eq!(counts.get("echo"), 1);
        assert!(
            started.elapsed() < Duration::from_millis(10),
            "the call never waits"
        );
    }
    assert_eq!(checks(&recorded(&snapshotter).await, ECHO), [0, 0, 0, 3]);
}

#[tokio::test(start_paused = true)]
async fn instances_on_one_store_count_repeats_that_alternate_between_them() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::new();
    let counts = Counts::default();
    let instance = |store: MemoryStore| {
        let layer = IdempotencyLayer::with_store(store).observe();
        Client::in_memory(tools(counts.clone()).layer(layer))
    };
    let (one, two) = (instance(store.clone()), instance(store));
    for n in 0..4 {
        let client = if n % 2 == 0 { &one } else { &two };
        client.post("/tools/echo", "s", "{}").await;
    }
    assert_eq!(counts.get("echo"), 4);
    assert_eq!(checks(&recorded(&snapshotter).await, ECHO), [1, 3, 0, 0]);
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn instances_on_one_redis_count_repeats_that_alternate_between_them() {
    use tower_idempotency::store::RedisStore;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let server = support::redis_server::RedisServer::start();
    let counts = Counts::default();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::connect(&server.url()).await.unwrap().tiered();
        let layer = IdempotencyLayer::with_store(store).observe();
        clients.push(Client::in_memory(tools(counts.clone()).layer(layer)));
    }
    for n in 0..6 {
        clients[n % 2].post("/tools/echo", "s", "{}").await;
    }
    assert_eq!(counts.get("echo"), 6);
    // The counts land as each call's count ends, in tasks of their own; each snapshot takes
    // what came since the one before, so the counts are added up until all six are in.
    let total = std::cell::Cell::new([0, 0]);
    let counted = support::process::eventually("six calls counted", Duration::from_secs(5), || {
        let snapshot = snapshotter.snapshot().into_vec();
        let result = |r| counter(&snapshot, CHECKS, &[ECHO, ("result", r)]);
        let [first, repeat] = total.get();
        let found = [first + result("first"), repeat + result("repeat")];
        total.set(found);
        async move { (found[0] + found[1] == 6).then_some(found) }
    })
    .await;
    assert_eq!(counted, [1, 5]);
}

/// An MCP server as far as observe mode needs one: each message counted by its method (a
/// call by its tool), each request answered with a result.
#[cfg(feature = "mcp")]
fn mcp_server(counts: Counts) -> axum::Router {
    use axum::routing::post;
    use axum::Json;
    use serde_json::{json, Value};
    let serve = move |Json(message): Json<Value>| {
        let counts = counts.clone();
        async move {
            let method = message["method"].as_str().unwrap_or_default();
            let n = match message["params"]["name"].as_str() {
                Some(tool) => counts.bump(&format!("{method} {tool}")),
                None => counts.bump(method),
            };
            match message.get("id") {
                Some(id) => Json(json!({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": format!("run {n}")}]
                }}))
                .into_response(),
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
    };
    use axum::response::IntoResponse;
    axum::Router::new().route("/mcp", post(serve))
}

#[cfg(feature = "mcp")]
#[tokio::test(start_paused = true)]
async fn on_an_mcp_endpoint_every_message_reaches_the_server_and_tool_calls_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let counts = Counts::default();
    let layer = IdempotencyLayer::new().observe().mcp();
    let client = Client::in_memory(mcp_server(counts.clone()).layer(layer));
    let send = |message: String| {
        let headers = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-session-id", "s1"),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        let client = client.clone();
        async move { client.post_with("/mcp", &headers, message).await }
    };
    let call = |id: u32, to: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"send_email","arguments":{{"to":"{to}"}}}}}}"#
        )
    };
    for (id, to) in [(1, "a"), (2, "a"), (3, "b"), (4, "a")] {
        let answer = send(call(id, to)).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.json()["id"], id, "the server's own answer");
    }
    let list = send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#.to_owned()).await;
    assert_eq!(list.json()["id"], 5);
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}"#;
    assert_eq!(send(cancel.to_owned()).await.status, StatusCode::ACCEPTED);
    assert_eq!(counts.get("tools/call send_email"), 4, "every call ran");
    assert_eq!(counts.get("tools/list"), 1);
    assert_eq!(
        counts.get("notifications/cancelled"),
        1,
        "the cancellation reached it"
    );
    let snapshot = recorded(&snapshotter).await;
    let tool = ("operation", "tools/call send_email");
    assert_eq!(checks(&snapshot, tool), [2, 2, 0, 0]);
}

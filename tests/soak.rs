//! Mixed traffic held for a few seconds across two instances on one Redis: unique intents,
//! concurrent duplicates, tools slower than the deadline, and status polls. At the end the
//! tools' own counters must show every intent executed exactly once, and every caller must
//! have had the final result or `in_progress`. Bounded in time and count, loopback only.
#![cfg(feature = "redis")]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use support::redis_server::RedisServer;
use support::{serve, tools, Client, Counts};
use tower_idempotency::store::RedisStore;
use tower_idempotency::IdempotencyLayer;

const INTENTS: u64 = 300;
const SOAK: Duration = Duration::from_secs(6);

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    results: AtomicU64,
    in_progress: AtomicU64,
    replayed: AtomicU64,
    other: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_traffic_on_two_instances_executes_every_intent_exactly_once() {
    let server = RedisServer::start();
    let counts = Counts::default();
    let mut instances = Vec::new();
    let mut detached = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::connect(&server.url()).await.unwrap().tiered();
        let layer = IdempotencyLayer::with_store(store).deadline(Duration::from_millis(150));
        detached.push(layer.detached());
        instances.push(Client::new(serve(tools(counts.clone()).layer(layer)).await));
    }
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..16u64 {
        let instances = instances.clone();
        let tally = Arc::clone(&tally);
        workers.push(tokio::spawn(async move {
            let mut n = worker;
            while started.elapsed() < SOAK {
                // Intent ids cycle, so every intent is asked for many times, from both
                // instances, sometimes at once; one in five is slower than the deadline.
                let id = n % INTENTS;
                let delay = if id.is_multiple_of(5) { 400 } else { 5 };
                let client = &instances[(n % 2) as usize];
                let body = format!(r#"{{"id":{id},"delay_ms":{delay}}}"#);
                let answer = client.post("/tools/intent", "soak", &body).await;
                tally.requests.fetch_add(1, Ordering::Relaxed);
                match answer.status {
                    StatusCode::OK => {
                        assert_eq!(answer.json()["id"], id);
                        tally.results.fetch_add(1, Ordering::Relaxed);
                        if answer.replayed() {
                            tally.replayed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    StatusCode::ACCEPTED => {
                        assert_eq!(answer.json()["outcome"], "in_progress");
                        tally.in_progress.fetch_add(1, Ordering::Relaxed);
                        // Poll the status path as an agent would, on the other instance.
                        let other = &instances[((n + 1) % 2) as usize];
                        let url = format!("/_idempotency/{}", answer.intent());
                        let status = other.get(&url, Some("soak")).await;
                        assert!(
                            status.status == StatusCode::ACCEPTED
                                || status.status == StatusCode::OK,
                            "status path: {}",
                            status.status
                        );
                    }
                    _ => {
                        tally.other.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n += 16 * 7 + 1;
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    // Once the slow executions have finished, every intent asked for once more is a result.
    for executions in &detached {
        executions.wait().await;
    }
    for id in 0..INTENTS {
        let delay = if id % 5 == 0 { 400 } else { 5 };
        let answer = instances[(id % 2) as usize]
            .post(
                "/tools/intent",
                "soak",
                &format!(r#"{{"id":{id},"delay_ms":{delay}}}"#),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "intent {id} has its final result"
        );
    }

    let all = counts.all();
    let executions = counts.get("intent");
    let duplicated: Vec<_> = (0..INTENTS)
        .filter(|id| all.get(&format!("intent:{id}")).copied().unwrap_or(0) != 1)
        .collect();
    let requests = tally.requests.load(Ordering::Relaxed);
    println!(
        "soak: {requests} requests over {INTENTS} intents in {:?} on 2 instances; {executions} executions; \
         {} results ({} replayed), {} in_progress, {} other; duplicates suppressed: {}",
        started.elapsed(),
        tally.results.load(Ordering::Relaxed),
        tally.replayed.load(Ordering::Relaxed),
        tally.in_progress.load(Ordering::Relaxed),
        tally.other.load(Ordering::Relaxed),
        requests + INTENTS - executions as u64,
    );
    assert!(
        duplicated.is_empty(),
        "intents not executed exactly once: {duplicated:?}"
    );
    assert_eq!(executions as u64, INTENTS);
    assert_eq!(
        tally.other.load(Ordering::Relaxed),
        0,
        "every caller got the result or in_progress"
    );
}

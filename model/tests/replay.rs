//! Sampled traces of the model replayed on a real Redis and a real PostgreSQL: each store
//! must answer every step as the memory store did. The traces take no tick (a server's leases
//! run on its own clock, which the model cannot move), so within one trace no lease lapses and
//! nothing expires; the store restarts without its data as a store under a new key prefix or
//! table.
//!
//! One difference is the stores' own: Redis and PostgreSQL take a `complete` or `release`
//! under a token that holds no lease where nothing live is held (no lease, no kept record:
//! nothing or a tombstone, as after the store lost its data), where the memory store fences
//! it unless its own lease is still in the map. Such a step ends the comparison of its trace,
//! the stores holding different things from then on; the traces so cut are counted, and most
//! traces must run to their end.
#![cfg(any(feature = "redis", feature = "postgres"))]

// The repository's test helpers, beside this crate root as they are beside `support/mod.rs`
// (they reach each other through `super`).
#[cfg(feature = "postgres")]
#[allow(dead_code)]
#[path = "../../tests/support/postgres_server.rs"]
mod postgres_server;
#[path = "../../tests/support/process.rs"]
mod process;
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

use std::future::Future;

use tower_idempotency::store::Store;
use tower_idempotency_model::calls::{call, summary};
use tower_idempotency_model::intents::Intent;
use tower_idempotency_model::step::Step;
use tower_idempotency_model::walk::random_trace;
use tower_idempotency_model::world::World;
use tower_idempotency_model::{Bounds, StoreModel};

/// How many traces each server replays.
const TRACES: u64 = 200;

/// The full bounds without a tick.
fn timeless() -> StoreModel {
    StoreModel::new(Bounds {
        ticks: 0,
        ..Bounds::exhaustive()
    })
}

/// A sampled trace and the memory store's answer to each of its steps.
struct Case {
    seed: u64,
    trace: Vec<Step>,
    expected: Vec<(String, bool)>,
}

/// `TRACES` sampled traces, drawn and run on the memory store outside any runtime (the model
/// runs its own).
fn sampled() -> (Vec<Intent>, Vec<Case>) {
    let model = timeless();
    let cases = (0..TRACES)
        .map(|seed| {
            let (actions, state) = random_trace(&model, seed);
            assert_eq!(state.view.broken, 0, "seed {seed}: {actions:?}");
            let expected = World::answers(&model.intents, &state.trace);
            Case {
                seed,
                trace: state.trace,
                expected,
            }
        })
        .collect();
    (model.intents, cases)
}

/// Replays every case on the stores `open` makes (a fresh one for each number), asserting
/// each answer is the memory store's; how many steps it replayed.
fn replay_each<S, F>(open: impl Fn(u32) -> F) -> usize
where
    S: Store,
    F: Future<Output = S>,
{
    let (intents, cases) = sampled();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut stores = 0;
        let mut steps = 0;
        let mut cut = 0;
        'traces: for case in &cases {
            let mut store = open(stores).await;
            stores += 1;
            for (at, step) in case.trace.iter().enumerate() {
                let answer = match step {
                    Step::Restart => {
                        store = open(stores).await;
                        stores += 1;
                        "Nothing".to_owned()
                    }
                    _ => summary(&replayed(&store, &intents, *step).await),
                };
                let (expected, free) = &case.expected[at];
                steps += 1;
                let taken_where_free = *free
                    && matches!(step, Step::Complete { .. } | Step::Release { .. })
                    && answer == "Fence(Held)"
                    && expected == "Fence(Lost)";
                if taken_where_free {
                    cut += 1;
                    continue 'traces;
                }
                assert_eq!(
                    &answer, expected,
                    "seed {}, step {at} ({step:?}) of {:?}",
                    case.seed, case.trace
                );
            }
        }
        println!("{cut} of {TRACES} traces cut where a lease-less write was taken");
        assert!(cut * 4 < TRACES, "{cut} of {TRACES} traces cut");
        steps
    })
}

async fn replayed<S: Store>(
    store: &S,
    intents: &[Intent],
    step: Step,
) -> tower_idempotency_model::calls::Answer {
    call(store, intents, step, 0)
        .await
        .expect("the server answers")
}

#[cfg(feature = "redis")]
#[test]
fn sampled_traces_answer_alike_on_redis() {
    use tower_idempotency::store::RedisStore;
    let server = redis_server::RedisServer::start();
    let url = server.url();
    let steps = replay_each(|n| {
        let url = url.clone();
        async move {
            RedisStore::builder()
                .prefix(format!("model{n}:"))
                .connect(&url)
                .await
                .expect("a Redis store")
        }
    });
    println!("{TRACES} traces, {steps} steps, answered alike on Redis");
    assert!(steps > TRACES as usize * 5);
}

#[cfg(feature = "postgres")]
#[test]
fn sampled_traces_answer_alike_on_postgres() {
    use tower_idempotency::store::PostgresStore;
    let server = postgres_server::PostgresServer::start();
    let url = server.url();
    let steps = replay_each(|n| {
        let url = url.clone();
        async move {
            PostgresStore::builder()
                .table(format!("model_{n}"))
                .connect(&url)
                .await
                .expect("a PostgreSQL store")
        }
    });
    println!("{TRACES} traces, {steps} steps, answered alike on PostgreSQL");
    assert!(steps > TRACES as usize * 5);
}

//! The Postgres store under the layer, on a PostgreSQL the tests start themselves: an owner
//! killed mid-execution leaves its intent to another instance once its lease lapses, observe
//! mode counts repeats across instances on one database, and transactional mode holds on a
//! store chosen by URL.
#![cfg(feature = "postgres")]

mod support;

use std::time::Duration;

use support::gateway;
use support::postgres_server::PostgresServer;
use support::process::eventually;
use support::{tools, Client, Counts};
use tower_idempotency::store::PostgresStore;
use tower_idempotency::IdempotencyLayer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owner_frees_the_intent_after_its_lease_and_another_instance_runs_it_once() {
    let database = PostgresServer::start();
    gateway::assert_a_killed_owner_frees_the_intent_once(("POSTGRES_URL", database.url())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_observe_mode_instances_on_one_database_count_repeats_together() {
    let database = PostgresServer::start();
    let counts = Counts::default();
    let mut clients = Vec::new();
    let mut reports = Vec::new();
    for _ in 0..2 {
        let store = PostgresStore::connect(&database.url()).await.unwrap();
        let layer = IdempotencyLayer::with_store(store.tiered()).observe();
        reports.push(layer.duplicates());
        clients.push(Client::in_memory(tools(counts.clone()).layer(layer)));
    }
    for n in 0..6 {
        clients[n % 2].post("/tools/echo", "s", "{}").await;
    }
    assert_eq!(counts.get("echo"), 6, "every call ran");
    let counted = eventually("six calls counted", Duration::from_secs(5), || {
        let found = reports.iter().fold([0, 0], |mut found, duplicates| {
            for op in duplicates.report().operations {
                found[0] += op.since_start.intents;
                found[1] += op.since_start.duplicates;
            }
            found
        });
        async move { (found[0] + found[1] == 6).then_some(found) }
    })
    .await;
    assert_eq!(
        counted,
        [1, 5],
        "one first call, five repeats, across both instances"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_mode_on_a_store_chosen_by_url_commits_in_the_handlers_transaction() {
    use axum::routing::post;
    use axum::{Extension, Router};
    use tower_idempotency::store::{AnyStore, Transaction};

    let memory = AnyStore::from_url("memory").await.unwrap();
    let refused = IdempotencyLayer::with_store(memory).transactional();
    let refused = refused.expect_err("the memory store has no transaction to give");
    assert!(refused.to_string().contains("PostgreSQL"), "{refused}");

    let database = PostgresServer::start();
    let builder = AnyStore::builder(&database.url()).unwrap();
    let store = builder.tiered().build().await.unwrap();
    async fn create(Extension(transaction): Extension<Transaction>) -> String {
        let client = transaction.client().await.unwrap();
        let sql =
            "CREATE TABLE IF NOT EXISTS orders (item text); INSERT INTO orders VALUES ('tea')";
        client.batch_execute(sql).await.unwrap();
        let row = client.query_one("SELECT count(*) FROM orders", &[]).await;
        row.unwrap().get::<_, i64>(0).to_string()
    }
    let layer = IdempotencyLayer::with_store(store).transactional().unwrap();
    let client = Client::in_memory(Router::new().route("/orders", post(create)).layer(layer));
    let first = client.post("/orders", "s", r#"{"item":"tea"}"#).await;
    assert_eq!(first.text(), "1", "{first:?}");
    let again = client.post("/orders", "s", r#"{"item":"tea"}"#).await;
    assert_eq!(again.text(), "1", "a replay, with one order: {again:?}");
}

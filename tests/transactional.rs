//! Transactional mode, on a PostgreSQL the tests start themselves: the `orders` example
//! inserts each order in its call's transaction, and the layer commits the call's record in
//! the same one. An order exists exactly when its call is recorded, whatever crashes.
#![cfg(feature = "postgres")]

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::Value;
use support::gateway::{start_example, Gateway};
use support::postgres_server::PostgresServer;
use support::process::eventually;
use support::relay::{Cut, Relay};
use support::Client;

const ORDER: &str = r#"{"item":"tea","delay_ms":300}"#;

/// A connection of the test's own to the database the examples use.
async fn database(server: &PostgresServer) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test's database");
    tokio::spawn(connection);
    client
}

async fn count(db: &tokio_postgres::Client, sql: &str) -> i64 {
    db.query_one(sql, &[]).await.expect(sql).get(0)
}

async fn orders(db: &tokio_postgres::Client) -> i64 {
    count(db, "SELECT count(*) FROM orders").await
}

/// Completed records of calls (the second byte of a value is its kind, `C`).
async fn records(db: &tokio_postgres::Client) -> i64 {
    let sql = "SELECT count(*) FROM idempotency_intents WHERE get_byte(value, 1) = 67";
    count(db, sql).await
}

/// Waits until a call's transaction holds its insert open (the example sleeps in it).
async fn a_transaction_is_open(db: &tokio_postgres::Client) {
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'";
    eventually(
        "a call's transaction open",
        Duration::from_secs(10),
        || async { (count(db, sql).await > 0).then_some(()) },
    )
    .await;
}

fn orders_example(server: &PostgresServer, lease_ms: &str) -> Gateway {
    orders_on(&server.url(), lease_ms)
}

/// The example on the database at `url`.
fn orders_on(url: &str, lease_ms: &str) -> Gateway {
    let url = url.to_owned();
    start_example(
        "orders",
        &[
            ("DATABASE_URL", url.as_str()),
            ("DEADLINE_MS", "10000"),
            ("LEASE_MS", lease_ms),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_on_two_instances_create_one_order() {
    let server = PostgresServer::start();
    let first = orders_example(&server, "30000");
    let second = orders_example(&server, "30000");
    let calls = (0..20).map(|n| {
        let client = if n % 2 == 0 {
            &first.client
        } else {
            &second.client
        };
        client.post("/orders", "s", ORDER)
    });
    let answers = futures_util::future::join_all(calls).await;
    let bodies: Vec<Value> = answers.iter().map(|answer| answer.json()).collect();
    for (answer, body) in answers.iter().zip(&bodies) {
        assert_eq!(answer.status, StatusCode::CREATED, "{body}");
        assert_eq!(body["order"], bodies[0]["order"], "one order, one body");
    }
    let db = database(&server).await;
    assert_eq!(orders(&db).await, 1);
    assert_eq!(records(&db).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_killed_with_its_transaction_open_leaves_no_order_and_its_retry_creates_one() {
    let server = PostgresServer::start();
    let db = database(&server).await;
    let mut owner = orders_example(&server, "1000");
    let slow = r#"{"item":"tea","delay_ms":2000}"#;
    let client = Client::new(owner.client.base.clone());
    let calling = tokio::spawn(async move { client.post("/orders", "s", slow).await });
    a_transaction_is_open(&db).await;
    owner.kill();
    let _ = calling.await;
    assert_eq!(
        orders(&db).await,
        0,
        "the open transaction died with its owner"
    );
    assert_eq!(records(&db).await, 0, "nothing recorded the call");

    // Retried on a new instance: once the dead owner's lease lapses it runs, once.
    let restarted = orders_example(&server, "1000");
    let created = eventually("the retry ran", Duration::from_secs(30), || async {
        let answer = restarted.client.post("/orders", "s", slow).await;
        (answer.status != StatusCode::ACCEPTED).then_some(answer)
    })
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let again = restarted.client.post("/orders", "s", slow).await;
    assert!(again.replayed(), "{}", again.text());
    assert_eq!(again.json()["order"], created.json()["order"]);
    assert_eq!(orders(&db).await, 1, "exactly one order");
    assert_eq!(records(&db).await, 1);
}

/// A slow order called on a new example, once its transaction holds the insert open: the
/// call's answer to come, the example, the database and the test's connection to it.
/// Every part is bound where it is taken apart: an unbound example or server would stop.
struct Held {
    calling: tokio::task::JoinHandle<support::Answer>,
    service: Gateway,
    db: tokio_postgres::Client,
    _server: PostgresServer,
}

const SLOW_ORDER: &str = r#"{"item":"tea","delay_ms":1500}"#;

async fn an_order_held_open() -> Held {
    let server = PostgresServer::start();
    let db = database(&server).await;
    let service = orders_example(&server, "30000");
    let client = Client::new(service.client.base.clone());
    let calling = tokio::spawn(async move { client.post("/orders", "s", SLOW_ORDER).await });
    a_transaction_is_open(&db).await;
    Held {
        calling,
        service,
        db,
        _server: server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_fenced_by_another_owner_rolls_the_order_back() {
    let Held {
        calling,
        db,
        service: _service,
        _server,
    } = an_order_held_open().await;
    // Another owner takes the intent: its running row now carries another token.
    let taken = db
        .execute(
            "UPDATE idempotency_intents SET value = overlay(value PLACING \
             '\\x0102030405060708090a0b0c0d0e0f10'::bytea FROM 3 FOR 16)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(taken, 1);
    let answer = calling.await.unwrap();
    let body = answer.json();
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["outcome"], "rolled_back", "{body}");
    assert_eq!(body["retryable"], true, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("rolled back"), "{detail}");
    assert!(detail.contains("may have happened"), "{detail}");
    assert_eq!(orders(&db).await, 0, "the order went with the rollback");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_refused_after_its_insert_is_rolled_back_and_its_repeat_runs_again() {
    let server = PostgresServer::start();
    let db = database(&server).await;
    let service = orders_example(&server, "30000");
    let refused = r#"{"item":"tea","fail":true}"#;
    for _ in 0..2 {
        let answer = service.client.post("/orders", "s", refused).await;
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!answer.replayed(), "a failure is not kept: the repeat runs");
    }
    assert_eq!(orders(&db).await, 0);
    let created = service.client.post("/orders", "s", ORDER).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(orders(&db).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_that_waits_past_the_call_timeout_for_a_connection_is_refused_with_nothing_run(
) {
    use std::sync::Arc;

    use axum::routing::post;
    use axum::{Extension, Router};
    use tokio::sync::Notify;
    use tower_idempotency::store::{PostgresStore, Transaction};
    use tower_idempotency::IdempotencyLayer;

    let server = PostgresServer::start();
    let db = database(&server).await;
    db.batch_execute("CREATE TABLE calls (n int)")
        .await
        .unwrap();
    let store = PostgresStore::builder()
        .transaction_pool_size(1)
        .call_timeout(Duration::from_millis(300))
        .connect(&server.url())
        .await
        .unwrap();
    // The call that has the connection holds it until the other has been answered.
    async fn call(
        Extension(transaction): Extension<Transaction>,
        Extension(answered): Extension<Arc<Notify>>,
    ) -> &'static str {
        let client = transaction.client().await.unwrap();
        client
            .execute("INSERT INTO calls VALUES (1)", &[])
            .await
            .unwrap();
        answered.notified().await;
        "done"
    }
    let answered = Arc::new(Notify::new());
    let app = Router::new()
        .route("/call", post(call))
        .layer(IdempotencyLayer::with_store(store).transactional())
        .layer(Extension(Arc::clone(&answered)));
    let client = Client::in_memory(app);
    let send = |body| {
        let (client, answered) = (&client, &answered);
        async move {
            let answer = client.post("/call", "s", body).await;
            answered.notify_one();
            answer
        }
    };
    let both = async { tokio::join!(send(r#"{"n":1}"#), send(r#"{"n":2}"#)) };
    let (one, two) = tokio::time::timeout(Duration::from_secs(30), both)
        .await
        .expect("the call without a connection is answered, not left waiting");
    let mut statuses = [one.status, two.status];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE]);
    let refused = if one.status == StatusCode::OK {
        two
    } else {
        one
    };
    assert_eq!(refused.json()["outcome"], "not_executed");
    assert_eq!(count(&db, "SELECT count(*) FROM calls").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_whose_connection_dies_is_told_rolled_back_and_its_retry_creates_one_order() {
    let Held {
        calling,
        service,
        db,
        _server,
    } = an_order_held_open().await;
    let ended = "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE state = 'idle in transaction') AS ended";
    assert_eq!(count(&db, ended).await, 1);
    let answer = calling.await.unwrap();
    let body = answer.json();
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["outcome"], "rolled_back", "{body}");
    assert_eq!(orders(&db).await, 0);
    let retried = service.client.post("/orders", "s", SLOW_ORDER).await;
    assert_eq!(retried.status, StatusCode::CREATED, "{}", retried.text());
    assert!(
        !retried.replayed(),
        "the rolled-back call was released: the retry ran"
    );
    assert_eq!(orders(&db).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_or_an_execution_past_its_bound_is_rolled_back_and_said_so() {
    use axum::routing::post;
    use axum::{Extension, Router};
    use tower_idempotency::store::{PostgresStore, Transaction};
    use tower_idempotency::IdempotencyLayer;

    let server = PostgresServer::start();
    let db = database(&server).await;
    db.batch_execute("CREATE TABLE calls (n int)")
        .await
        .unwrap();
    async fn insert(transaction: &Transaction) {
        let client = transaction.client().await.unwrap();
        client
            .execute("INSERT INTO calls VALUES (1)", &[])
            .await
            .unwrap();
    }
    async fn crashes(Extension(transaction): Extension<Transaction>) -> &'static str {
        insert(&transaction).await;
        panic!("the tool crashed after its insert");
    }
    async fn hangs(Extension(transaction): Extension<Transaction>) -> &'static str {
        insert(&transaction).await;
        std::future::pending::<()>().await;
        "late"
    }
    let store = PostgresStore::connect(&server.url()).await.unwrap();
    let layer = IdempotencyLayer::with_store(store)
        .transactional()
        .max_execution(Duration::from_millis(300));
    let app = Router::new()
        .route("/crashes", post(crashes))
        .route("/hangs", post(hangs))
        .layer(layer);
    let client = Client::in_memory(app);
    for path in ["/crashes", "/hangs"] {
        for attempt in 0..2 {
            let answer = client.post(path, "s", "{}").await;
            let body = answer.json();
            assert_eq!(
                answer.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{path}: {body}"
            );
            assert_eq!(body["outcome"], "rolled_back", "{path} #{attempt}: {body}");
            assert_eq!(body["retryable"], true, "{path}: {body}");
        }
    }
    assert_eq!(count(&db, "SELECT count(*) FROM calls").await, 0);
}

/// The example behind a relay that breaks the connection of the first `COMMIT`, `at` the
/// given moment; the call, and what the database then holds.
async fn a_commit_broken(at: Cut) -> (support::Answer, i64, PostgresServer) {
    let server = PostgresServer::start();
    let relay = Relay::start(server.port, b"COMMIT", at).await;
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", relay.port);
    let service = orders_on(&url, "2000");
    // Past the store's own start, which commits its tables.
    relay.arm();
    let answer = service.client.post("/orders", "s", ORDER).await;
    assert!(relay.has_cut(), "the commit's connection was broken");
    let db = database(&server).await;
    let orders = orders(&db).await;
    (answer, orders, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_is_lost_is_read_back_as_kept() {
    let (answer, orders, _server) = a_commit_broken(Cut::After).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());
    assert_eq!(orders, 1, "the commit went through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_never_reached_the_database_is_read_back_as_rolled_back() {
    let (answer, orders, _server) = a_commit_broken(Cut::Before).await;
    let body = answer.json();
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["outcome"], "rolled_back", "{body}");
    assert_eq!(orders, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_session_settings_do_not_reach_the_next_call_on_its_connection() {
    use axum::routing::post;
    use axum::{Extension, Router};
    use tower_idempotency::store::{PostgresStore, Transaction};
    use tower_idempotency::IdempotencyLayer;

    let server = PostgresServer::start();
    // One connection: the second call gets the first one's.
    let store = PostgresStore::builder()
        .transaction_pool_size(1)
        .connect(&server.url())
        .await
        .unwrap();
    async fn role(Extension(transaction): Extension<Transaction>, body: String) -> String {
        let client = transaction.client().await.unwrap();
        let before: String = client
            .query_one("SELECT current_setting('app.tenant', true)", &[])
            .await
            .unwrap()
            .get::<_, Option<String>>(0)
            .unwrap_or_default();
        // A session setting, which outlives the transaction.
        client
            .execute("SELECT set_config('app.tenant', $1, false)", &[&body])
            .await
            .unwrap();
        before
    }
    let app = Router::new()
        .route("/role", post(role))
        .layer(IdempotencyLayer::with_store(store).transactional());
    let client = Client::in_memory(app);
    let first = client.post("/role", "s", r#""tenant-a""#).await;
    assert_eq!(first.text(), "");
    let second = client.post("/role", "s", r#""tenant-b""#).await;
    assert_eq!(
        second.text(),
        "",
        "the first call's session setting reached the second"
    );
}

//! The proxy on a PostgreSQL store the tests start themselves, in front of a Python tool
//! server: proxies that share the database run a call once, and a database that stops is
//! answered in words and recovered from without a restart.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use support::postgres_server::PostgresServer;
use support::process::eventually;
use support::{post, stats, Proxy, Upstream};

const EMAIL: &str = r#"{"to":"ada@example.com","subject":"Q3","delay_ms":300}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_postgres_run_forty_concurrent_identical_calls_once() {
    let database = PostgresServer::start();
    let upstream = Upstream::tools(0);
    let url = database.url();
    let start = || Proxy::in_front_of(&upstream.url(), &["--postgres-url", &url]);
    let (one, two) = (start(), start());
    let calls = (0..40).map(|n| {
        let proxy = if n % 2 == 0 {
            one.url.clone()
        } else {
            two.url.clone()
        };
        tokio::spawn(async move { post(&proxy, "/tools/send_email", Some("s1"), EMAIL).await })
    });
    let mut bodies = HashSet::new();
    for answer in futures_util::future::join_all(calls).await {
        let answer = answer.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        bodies.insert(answer.text().to_owned());
    }
    assert_eq!(bodies.len(), 1, "one body for every caller: {bodies:?}");
    assert_eq!(
        stats(&upstream.url()).await["send_email"],
        1,
        "one execution"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_postgres_down_nothing_runs_and_once_it_is_back_the_proxy_recovers() {
    // A database that keeps what it acknowledged through the kill: one that acknowledges before
    // its log is written (the tests' default) loses the first call's record, and with it the
    // promise below, whatever the proxy does.
    let mut database = PostgresServer::start_durable();
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &["--postgres-url", &database.url()]);
    let first = post(&proxy.url, "/tools/send_email", Some("s1"), EMAIL).await;
    assert_eq!(first.status, 200, "{first:?}");
    database.kill();
    let refused = post(&proxy.url, "/tools/send_email", Some("s2"), EMAIL).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.json()["outcome"], "not_executed");
    assert_eq!(refused.json()["retryable"], true);
    assert_eq!(
        stats(&upstream.url()).await["send_email"],
        1,
        "nothing ran meanwhile"
    );
    database.restart();
    let recovered = eventually(
        "the proxy back on its database",
        Duration::from_secs(20),
        || async {
            let answer = post(&proxy.url, "/tools/send_email", Some("s2"), EMAIL).await;
            (answer.status == 200).then_some(answer)
        },
    )
    .await;
    assert!(!recovered.replayed());
    // The first call was answered at once and its record written beside the answer: where the
    // database went down before the write landed, the write is retried in the background (at
    // least every 5 s) while the lease holds, so a repeat meanwhile is told "in progress", and
    // is replayed once it lands. Nothing runs twice either way.
    let again = eventually(
        "the first call's record in the database",
        Duration::from_secs(20),
        || async {
            let again = post(&proxy.url, "/tools/send_email", Some("s1"), EMAIL).await;
            assert!(
                matches!(again.status.as_u16(), 200 | 202),
                "kept or in progress, never run again: {again:?}"
            );
            again.replayed().then_some(again)
        },
    )
    .await;
    assert_eq!(
        again.body, first.body,
        "what was kept before the stop is still kept"
    );
    assert_eq!(stats(&upstream.url()).await["send_email"], 2);
}

//! `idempotency-proxy inspect <intent>` against a running proxy: the intent's story as a table,
//! its failure, its retry and its success in order, and no row for a replay; on a shared
//! Redis, each step names the proxy that made it.

mod support;

use std::process::{Command, Output};

use http::StatusCode;
use support::redis_server::RedisServer;
use support::{post, proxy_with_config, Upstream};

const TOKEN: &str = "an-operators-long-random-token";

/// Runs `idempotency-proxy inspect` with `args` and the environment `env`, to its exit.
async fn inspect(args: Vec<String>, env: Vec<(&'static str, String)>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_idempotency-proxy"))
            .arg("inspect")
            .args(args)
            .env_remove("IDEMPOTENCY_ADMIN_TOKEN")
            .envs(env)
            .output()
            .expect("run idempotency-proxy inspect")
    })
    .await
    .unwrap()
}

/// The rows of `inspect`'s table, split into words.
fn rows(printed: &str) -> Vec<Vec<&str>> {
    (printed.lines())
        .skip_while(|line| !line.starts_with("TIME"))
        .skip(1)
        .map(|line| line.split_whitespace().collect())
        .collect()
}

#[tokio::test]
async fn inspect_prints_an_intents_failure_retry_and_success_in_order_and_no_replay() {
    let upstream = Upstream::tools(0);
    let file = format!("metrics_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n");
    let (proxy, _file) = proxy_with_config(&upstream.url(), &file);
    let metrics = proxy.metrics.clone().expect("a metrics listener");

    // The flaky tool answers 503 the first time, 200 after.
    let failed = post(&proxy.url, "/tools/flaky", Some("s1"), "{}").await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    let retried = post(&proxy.url, "/tools/flaky", Some("s1"), "{}").await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.text());
    let replayed = post(&proxy.url, "/tools/flaky", Some("s1"), "{}").await;
    assert!(replayed.replayed());
    let intent = retried.intent().to_owned();

    // The token from the environment, where the process list does not show it.
    let args = vec![intent.clone(), "--admin-url".to_owned(), metrics.clone()];
    let shown = inspect(
        args.clone(),
        vec![("IDEMPOTENCY_ADMIN_TOKEN", TOKEN.into())],
    )
    .await;
    let printed = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(printed.contains(&intent), "{printed}");
    assert!(printed.contains("POST /tools/flaky"), "{printed}");
    let rows = rows(&printed);
    let events: Vec<(&str, Option<&str>)> = rows
        .iter()
        .map(|row| (row[1], row.get(2).filter(|s| s.len() == 3).copied()))
        .collect();
    assert_eq!(
        events,
        [
            ("claimed", None),
            ("released", Some("503")),
            ("claimed", None),
            ("executed", Some("200")),
        ],
        "{printed}"
    );
    assert!(rows[1].ends_with(&["cause:", "status"]), "{printed}");
    assert!(rows[0][0].ends_with('Z'), "times in RFC 3339: {printed}");

    // A wrong token is refused, in words, and the exit status says it failed.
    let wrong = inspect(
        [args, vec!["--admin-token".into(), "not-the-token".into()]].concat(),
        vec![],
    )
    .await;
    assert_eq!(wrong.status.code(), Some(1));
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(said.contains("refused the token"), "{said}");

    // An intent the store holds nothing of is said so.
    let unknown = inspect(
        vec![
            "0".repeat(64),
            "--admin-url".into(),
            metrics,
            "--admin-token".into(),
            TOKEN.into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(unknown.status.code(), Some(1));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(said.contains("holds nothing of this intent"), "{said}");
}

#[tokio::test]
async fn on_a_shared_redis_each_step_of_the_story_names_the_proxy_that_made_it() {
    let redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    let file = format!(
        "metrics_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n[store]\nredis_url = \"{}\"\n",
        redis.url()
    );
    let (one, _one_file) = proxy_with_config(&upstream.url(), &file);
    let (two, _two_file) = proxy_with_config(&upstream.url(), &file);

    let failed = post(&one.url, "/tools/flaky", Some("s1"), "{}").await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    let retried = post(&two.url, "/tools/flaky", Some("s1"), "{}").await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.text());
    assert!(post(&one.url, "/tools/flaky", Some("s1"), "{}")
        .await
        .replayed());

    let metrics = one.metrics.clone().expect("a metrics listener");
    let args = vec![
        retried.intent().to_owned(),
        "--admin-url".to_owned(),
        metrics,
    ];
    let shown = inspect(args, vec![("IDEMPOTENCY_ADMIN_TOKEN", TOKEN.into())]).await;
    let printed = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let rows = rows(&printed);
    let events: Vec<&str> = rows.iter().map(|row| row[1]).collect();
    assert_eq!(
        events,
        ["claimed", "released", "claimed", "executed"],
        "{printed}"
    );
    let instance = |row: &[&str]| -> String {
        row.iter()
            .find(|word| word.len() == 8 && word.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(|word| (*word).to_owned())
            .unwrap_or_default()
    };
    let (first, second) = (instance(&rows[0]), instance(&rows[2]));
    assert!(!first.is_empty() && !second.is_empty(), "{printed}");
    assert_eq!(instance(&rows[1]), first, "{printed}");
    assert_eq!(instance(&rows[3]), second, "{printed}");
    assert_ne!(first, second, "two proxies, two names: {printed}");
}

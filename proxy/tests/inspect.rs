//! `idempotency-proxy inspect <intent>` against a running proxy: the intent's story as a table,
//! its failure, its retry and its success in order, and no row for a replay.

mod support;

use std::process::{Command, Output};

use http::StatusCode;
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
    let rows: Vec<Vec<&str>> = (printed.lines())
        .skip_while(|line| !line.starts_with("TIME"))
        .skip(1)
        .map(|line| line.split_whitespace().collect())
        .collect();
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

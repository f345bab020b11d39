//! A store URL's password is never printed: not when the URL is refused, not when its store
//! cannot be reached, not in the logs, and not in `/readyz`, which says why in its own words.

mod support;

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::postgres_server::PostgresServer;
use support::process::{eventually, exited_within, lines, listening};
use support::{client, free_port};

const SECRET: &str = "S3cr3tPw";

fn proxy_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_idempotency-proxy"));
    command
        .args([
            "--upstream",
            "http://127.0.0.1:9",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Every line `pipe` gave until it closed.
fn drained(pipe: &mpsc::Receiver<String>) -> String {
    let mut text = String::new();
    while let Ok(line) = pipe.recv_timeout(Duration::from_secs(5)) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Runs the proxy with `args` until it exits by itself: its exit code, stdout and stderr.
fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let mut child = proxy_command(args).spawn().expect("run idempotency-proxy");
    let (stdout, stderr) = (
        lines(child.stdout.take().unwrap()),
        lines(child.stderr.take().unwrap()),
    );
    let Some(status) = exited_within(&mut child, Duration::from_secs(20)) else {
        let _ = child.kill();
        panic!("the proxy started with {args:?}");
    };
    (status.code(), drained(&stdout) + &drained(&stderr))
}

fn assert_never_shown(output: &str) {
    assert!(!output.contains(SECRET), "the password is shown: {output}");
}

#[test]
fn a_postgres_password_is_never_printed_when_the_store_cannot_be_reached() {
    let port = free_port();
    let url = format!("postgres://app:{SECRET}@127.0.0.1:{port}/app");
    let (code, output) = run_to_exit(&["--postgres-url", &url]);
    assert_eq!(code, Some(1), "{output}");
    assert_never_shown(&output);
    let shown = format!("postgres://app:***@127.0.0.1:{port}/app");
    assert!(output.contains(&shown), "{output}");
}

#[test]
fn a_postgres_password_in_key_value_form_is_never_printed() {
    let port = free_port();
    let quoted =
        format!("host=127.0.0.1 port={port} user=app password='a b@c:{SECRET}' dbname=app");
    let (code, output) = run_to_exit(&["--postgres-url", &quoted]);
    assert!(code == Some(1) || code == Some(2), "{output}");
    assert_never_shown(&output);
    assert!(output.contains("password=***"), "{output}");
    let plain = format!("host=127.0.0.1 password={SECRET} port={port}");
    let (_, output) = run_to_exit(&["--postgres-url", &plain]);
    assert_never_shown(&output);
    assert!(
        output.contains(&format!("password=*** port={port}")),
        "{output}"
    );
}

#[test]
fn a_malformed_store_url_with_a_password_is_never_printed() {
    let url = format!("postgresql+asyncpg://app:{SECRET}@db.internal/app");
    let (code, output) = run_to_exit(&["--postgres-url", &url]);
    assert_eq!(code, Some(2), "{output}");
    assert_never_shown(&output);
    assert!(
        output.contains("postgresql+asyncpg://app:***@db.internal/app"),
        "{output}"
    );
    let url = format!("http://:{SECRET}@127.0.0.1:6379");
    let (code, output) = run_to_exit(&["--redis-url", &url]);
    assert_eq!(code, Some(2), "{output}");
    assert_never_shown(&output);
    // In the file, a misspelt key shows its line: without the password.
    let file = support::config_file(&format!(
        "[store]\npostgress_url = \"postgres://app:{SECRET}@db.internal/app\"\n"
    ));
    let (code, output) = run_to_exit(&["--config", file.path().to_str().unwrap()]);
    assert_eq!(code, Some(2), "{output}");
    assert_never_shown(&output);
    assert!(output.contains("postgress_url"), "{output}");
}

#[test]
fn a_redis_password_is_never_printed() {
    let port = free_port();
    for url in [
        format!("redis://:{SECRET}@127.0.0.1:{port}"),
        format!("redis://app:{SECRET}@127.0.0.1:{port}/0"),
    ] {
        let (code, output) = run_to_exit(&["--redis-url", &url]);
        assert_eq!(code, Some(1), "{output}");
        assert_never_shown(&output);
        assert!(output.contains(":***@127.0.0.1"), "{output}");
    }
    let other = free_port();
    let nodes = format!("redis://:{SECRET}@127.0.0.1:{port},redis://:{SECRET}@127.0.0.1:{other}");
    let (code, output) = run_to_exit(&["--redis-cluster-urls", &nodes]);
    assert_eq!(code, Some(1), "{output}");
    assert_never_shown(&output);
    let nodes = format!("redis://127.0.0.1:{port},http://:{SECRET}@127.0.0.1:{other}");
    let (code, output) = run_to_exit(&["--redis-cluster-urls", &nodes]);
    assert_eq!(code, Some(2), "{output}");
    assert_never_shown(&output);
    assert!(output.contains("http://:***@127.0.0.1"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_not_ready_in_words_without_the_databases_error_or_the_password() {
    let mut database = PostgresServer::start();
    // The tests' server trusts every local connection: the password is sent along, unused.
    let url = database
        .url()
        .replace("postgres@", &format!("postgres:{SECRET}@"));
    let mut child: Child =
        proxy_command(&["--postgres-url", &url, "--metrics-listen", "127.0.0.1:0"])
            .spawn()
            .expect("start idempotency-proxy");
    let (stdout, stderr) = (
        lines(child.stdout.take().unwrap()),
        lines(child.stderr.take().unwrap()),
    );
    let (_, before) = listening(&mut child, &stdout, "the proxy");
    let metrics = before
        .iter()
        .find_map(|line| line.strip_prefix("metrics on "))
        .expect("a metrics listener")
        .to_owned();
    let readyz = || support::answer(client().get(format!("{metrics}/readyz")));
    assert_eq!(readyz().await.status, 200);
    database.kill();
    let down = eventually("not ready", Duration::from_secs(10), || async {
        let answer = readyz().await;
        (answer.status == 503).then_some(answer)
    })
    .await;
    assert_eq!(
        down.text(),
        "not ready: the store cannot answer (the proxy's log says why)\n"
    );
    let _ = child.kill();
    let _ = child.wait();
    let output = before.join("\n") + &drained(&stdout) + &drained(&stderr);
    assert_never_shown(&output);
    assert!(
        output.contains("the store cannot answer a readiness probe"),
        "the log keeps the detail: {output}"
    );
}

//! The proxy as a process: refused configurations, health and readiness, metrics, and a
//! shutdown that lets the execution in flight finish and record.

mod support;

use std::time::Duration;

use support::process::eventually;
use support::redis_server::RedisServer;
use support::{client, post, refused, stats, Proxy, Upstream};

use support::config_file as file;

#[test]
fn a_bad_configuration_exits_with_status_2_and_says_which_setting_and_where() {
    let misspelt =
        file("[upstream]\nurl = \"http://127.0.0.1:8000\"\n\n[scope]\nheadr = \"x-user\"\n");
    let path = misspelt.path().to_str().unwrap();
    let (code, stderr) = refused(&["--config", path]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("line 5"), "{stderr}");
    assert!(
        stderr.contains("headr") && stderr.contains("`principal_header`"),
        "{stderr}"
    );

    let bad_value = file("[upstream]\nurl = \"http://127.0.0.1:8000\"\ntimeout = \"forever\"\n");
    let path = bad_value.path().to_str().unwrap();
    let (code, stderr) = refused(&["--config", path]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("line 3") && stderr.contains("\"20s\""),
        "{stderr}"
    );

    let not_toml = file("listen = [\n");
    let path = not_toml.path().to_str().unwrap();
    assert_eq!(refused(&["--config", path]).0, Some(2));

    let (code, stderr) = refused(&["--config", "/nonexistent/proxy.toml"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("cannot read /nonexistent/proxy.toml"),
        "{stderr}"
    );

    let (code, stderr) = refused(&[]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--upstream"), "{stderr}");

    let (code, stderr) = refused(&["--upstream", "http://127.0.0.1:1", "--deadline", "soon"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--deadline"), "{stderr}");

    let (code, stderr) = refused(&["--upstream", "http://127.0.0.1:1", "--retries", "3"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--retries"), "{stderr}");
}

#[test]
fn a_store_it_cannot_reach_at_start_stops_it_with_status_1() {
    let port = support::free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let (code, stderr) = refused(&["--upstream", "http://127.0.0.1:1", "--redis-url", &url]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot connect to Redis"), "{stderr}");
}

#[tokio::test]
async fn health_readiness_and_metrics_are_served_apart_and_readiness_follows_the_store() {
    let mut redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(
        &upstream.url(),
        &[
            "--redis-url",
            &redis.url(),
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let metrics = proxy.metrics.clone().expect("a metrics listener");
    let get = |path: &str| support::answer(client().get(format!("{metrics}{path}")));
    assert_eq!(get("/healthz").await.status, 200);
    assert_eq!(get("/readyz").await.status, 200);
    let sent = post(&proxy.url, "/tools/send_email", Some("s1"), "{}").await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let scraped = get("/metrics").await;
    let executed = r#"idempotency_executions_total{operation="POST /tools/send_email"} 1"#;
    assert!(scraped.text().contains(executed), "{}", scraped.text());
    // Histograms come with buckets, as the README's panels read them.
    for series in [
        r#"idempotency_request_duration_seconds_bucket{operation="POST /tools/send_email",le="0.1"}"#,
        r#"idempotency_intent_attempts_bucket{operation="POST /tools/send_email",le="1"} 1"#,
        r#"idempotency_store_duration_seconds_bucket{call="claim",le="0.01"}"#,
    ] {
        assert!(
            scraped.text().contains(series),
            "{series} in {}",
            scraped.text()
        );
    }
    // The traffic listener does not serve them.
    let not_here = support::answer(client().get(format!("{}/readyz", proxy.url))).await;
    assert_eq!(not_here.status, 404);
    redis.kill();
    let down = get("/readyz").await;
    assert_eq!(down.status, 503, "{down:?}");
    assert!(
        down.text().starts_with("not ready: the store"),
        "{}",
        down.text()
    );
    assert_eq!(get("/healthz").await.status, 200);
}

/// Waits until the proxy whose metrics listener is `metrics` says it is not ready, as it does
/// from the moment a shutdown begins; its answer.
async fn not_ready(metrics: &str) -> support::Answer {
    eventually("readiness turning 503", Duration::from_secs(5), || async {
        let ready = support::answer(client().get(format!("{metrics}/readyz"))).await;
        (ready.status == 503).then_some(ready)
    })
    .await
}

#[tokio::test]
async fn sigterm_lets_the_execution_in_flight_finish_and_record_before_exiting() {
    let redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    let (url, redis_url) = (upstream.url(), redis.url());
    let start = |deadline: &str| {
        let flags = ["--redis-url", &redis_url, "--deadline", deadline];
        Proxy::in_front_of(
            &url,
            &[&flags[..], &["--metrics-listen", "127.0.0.1:0"]].concat(),
        )
    };
    let mut first = start("200ms");
    let slow = r#"{"to":"ada@example.com","delay_ms":1500}"#;
    let answer = post(&first.url, "/tools/send_email", Some("s1"), slow).await;
    assert_eq!(answer.status, 202, "{answer:?}");
    let metrics = first.metrics.clone().unwrap();
    first.terminate();
    // Shutting down: not ready, while the execution runs on.
    let ready = not_ready(&metrics).await;
    assert!(ready.text().contains("shutting down"), "{}", ready.text());
    let (code, stderr) = first.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("shutdown: 0 execution(s) left unfinished"),
        "{stderr}"
    );
    assert_eq!(stats(&upstream.url()).await["send_email"], 1);
    // Recorded before the exit: another instance on the same store replays it.
    let second = start("5s");
    let replay = post(&second.url, "/tools/send_email", Some("s1"), slow).await;
    assert_eq!(replay.status, 200, "{replay:?}");
    assert!(replay.replayed());
    assert_eq!(stats(&upstream.url()).await["send_email"], 1);
}

#[tokio::test]
async fn sigterm_waits_for_an_execution_that_starts_after_it_from_a_request_in_flight() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    let (url, redis_url) = (upstream.url(), redis.url());
    let start = |deadline: &str| {
        let flags = ["--redis-url", &redis_url, "--deadline", deadline];
        Proxy::in_front_of(
            &url,
            &[&flags[..], &["--metrics-listen", "127.0.0.1:0"]].concat(),
        )
    };
    let mut first = start("200ms");
    let slow = r#"{"to":"ada@example.com","delay_ms":1500}"#;
    // A client still sending its body when the signal comes: nothing runs yet.
    let address = first.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /tools/send_email HTTP/1.1\r\nhost: {address}\r\nx-session-id: s1\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        slow.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&slow.as_bytes()[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.terminate();
    // The rest of the body once the shutdown has begun.
    let metrics = first.metrics.clone().unwrap();
    not_ready(&metrics).await;
    stream.write_all(&slow.as_bytes()[10..]).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    // The execution it started runs to its end and is recorded before the exit.
    let (code, stderr) = first.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("shutdown: 0 execution(s) left unfinished"),
        "{stderr}"
    );
    let second = start("5s");
    let replay = post(&second.url, "/tools/send_email", Some("s1"), slow).await;
    assert_eq!(replay.status, 200, "{replay:?}");
    assert!(replay.replayed());
    assert_eq!(stats(&upstream.url()).await["send_email"], 1);
}

#[test]
fn with_log_format_json_every_log_line_is_a_json_object() {
    let upstream = Upstream::tools(0);
    let config = file("log_format = \"json\"\n");
    let path = config.path().to_str().unwrap();
    let url = upstream.url();
    let args = [
        "--upstream",
        &url,
        "--listen",
        "127.0.0.1:0",
        "--config",
        path,
    ];
    let mut proxy = Proxy::start_with_env(&args, &[("RUST_LOG", "info")]);
    proxy.terminate();
    let (code, stderr) = proxy.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == "started"),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l["fields"]["unfinished"] == 0),
        "{stderr}"
    );
}

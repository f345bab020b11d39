//! When the upstream gives no answer, the proxy says what happened to the action: never
//! sent is released for a retry; sent and then lost is kept as "may have run", never run
//! again by a retry.

mod support;

use std::time::Duration;

use support::{free_port, post, stats, Proxy, Upstream};

#[tokio::test]
async fn an_upstream_that_is_down_is_not_executed_and_runs_once_it_is_back() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let proxy = Proxy::in_front_of(&url, &["--metrics-listen", "127.0.0.1:0"]);
    let email = r#"{"to":"ada@example.com"}"#;
    let down = post(&proxy.url, "/tools/send_email", Some("s1"), email).await;
    assert_eq!(down.status, 503, "{down:?}");
    let told = down.json();
    assert_eq!(told["outcome"], "not_executed");
    assert_eq!(told["retryable"], true);
    assert!(told["detail"]
        .as_str()
        .unwrap()
        .starts_with("This action was not executed"));
    let metrics = proxy.metrics.clone().unwrap();
    let scraped = support::answer(support::client().get(format!("{metrics}/metrics"))).await;
    assert!(
        scraped
            .text()
            .contains("idempotency_proxy_upstream_errors_total{kind=\"connect\"} 1"),
        "{}",
        scraped.text()
    );
    let upstream = Upstream::tools(port);
    let back = post(&proxy.url, "/tools/send_email", Some("s1"), email).await;
    assert_eq!(back.status, 200, "{back:?}");
    assert!(!back.replayed());
    let again = post(&proxy.url, "/tools/send_email", Some("s1"), email).await;
    assert!(again.replayed());
    assert_eq!(stats(&upstream.url()).await["send_email"], 1);
}

#[tokio::test]
async fn an_upstream_that_times_out_after_receiving_the_request_is_kept_as_may_have_run() {
    let upstream = Upstream::tools(0);
    let (proxy, _config) = support::proxy_with_config(
        &upstream.url(),
        "[upstream]\nconnect_timeout = \"200ms\"\n[[routes]]\nprefix = \"/tools/hang\"\ntimeout = \"500ms\"\ndeadline = \"10s\"\n",
    );
    let body = r#"{"delay_ms":3000}"#;
    let first = post(&proxy.url, "/tools/hang", Some("s1"), body).await;
    assert_eq!(first.status, 504, "{first:?}");
    let told = first.json();
    assert_eq!(told["outcome"], "unknown");
    assert_eq!(told["retryable"], false);
    let detail = told["detail"].as_str().unwrap();
    assert!(detail.starts_with("This action may have run"), "{detail}");
    assert!(detail.contains("no answer came within 500ms"), "{detail}");
    let retry = post(&proxy.url, "/tools/hang", Some("s1"), body).await;
    let told = retry.json();
    assert_eq!(told["outcome"], "unknown", "{retry:?}");
    assert!(told["detail"]
        .as_str()
        .unwrap()
        .starts_with("This action may have run"));
    assert_eq!(stats(&upstream.url()).await["hang"], 1);
}

#[tokio::test]
async fn an_upstream_that_drops_the_connection_after_the_request_is_never_run_again() {
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &[]);
    let first = post(&proxy.url, "/tools/reset", Some("s1"), "{}").await;
    assert_eq!(first.status, 502, "{first:?}");
    assert_eq!(first.json()["outcome"], "unknown");
    for _ in 0..3 {
        let retry = post(&proxy.url, "/tools/reset", Some("s1"), "{}").await;
        assert_eq!(retry.json()["outcome"], "unknown", "{retry:?}");
    }
    assert_eq!(stats(&upstream.url()).await["reset"], 1);
}

#[tokio::test]
async fn on_a_pass_through_route_a_lost_answer_says_a_retry_would_run_it_again() {
    let upstream = Upstream::tools(0);
    let (proxy, _config) = support::proxy_with_config(
        &upstream.url(),
        "[[routes]]\nprefix = \"/tools/reset\"\nmode = \"pass\"\n",
    );
    let lost = post(&proxy.url, "/tools/reset", Some("s1"), "{}").await;
    assert_eq!(lost.status, 502);
    let detail = lost.json()["detail"].as_str().unwrap().to_owned();
    assert!(detail.starts_with("This action may have run"), "{detail}");
    assert!(detail.contains("Check its effect"), "{detail}");
    // Passed through: nothing kept, so the call runs again.
    post(&proxy.url, "/tools/reset", Some("s1"), "{}").await;
    assert_eq!(stats(&upstream.url()).await["reset"], 2);
}

#[tokio::test]
async fn an_answer_that_stalls_midway_is_cut_at_the_routes_timeout_and_kept_as_may_have_run() {
    let upstream = Upstream::tools(0);
    let (proxy, _config) = support::proxy_with_config(
        &upstream.url(),
        "[upstream]\nconnect_timeout = \"200ms\"\n[[routes]]\nprefix = \"/tools/stall\"\ntimeout = \"700ms\"\n",
    );
    let started = std::time::Instant::now();
    let first = support::answer(
        reqwest::Client::new()
            .post(format!("{}/tools/stall", proxy.url))
            .header("x-session-id", "s1")
            .header("content-type", "application/json")
            .timeout(Duration::from_secs(5))
            .body("{}"),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(first.json()["outcome"], "unknown", "{first:?}");
    let retry = post(&proxy.url, "/tools/stall", Some("s1"), "{}").await;
    assert_eq!(retry.json()["outcome"], "unknown", "{retry:?}");
    assert_eq!(stats(&upstream.url()).await["stall"], 1);
}

#[tokio::test]
async fn an_answer_that_breaks_off_midway_is_kept_as_may_have_run() {
    let upstream = Upstream::tools(0);
    let proxy = Proxy::in_front_of(&upstream.url(), &[]);
    let first = post(&proxy.url, "/tools/truncate", Some("s1"), "{}").await;
    assert_eq!(first.status, 502, "{first:?}");
    let told = first.json();
    assert_eq!(told["outcome"], "unknown");
    assert!(told["detail"]
        .as_str()
        .unwrap()
        .starts_with("This action may have run"));
    let retry = post(&proxy.url, "/tools/truncate", Some("s1"), "{}").await;
    assert_eq!(retry.json()["outcome"], "unknown", "{retry:?}");
    assert_eq!(stats(&upstream.url()).await["truncate"], 1);
}

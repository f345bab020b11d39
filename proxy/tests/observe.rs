//! The proxy in observe mode in front of a Python tool server, both real processes: every call
//! reaches the upstream, and the repeats of each tool are counted, across proxies that share a
//! Redis.

mod support;

use std::time::Duration;

use support::process::eventually;
use support::redis_server::RedisServer;
use support::{client, post, stats, Proxy, Upstream};

const EMAIL: &str = r#"{"to":"ada@example.com","subject":"Q3"}"#;

/// The value of the series `line` starts with on `metrics`' scrape, if it is there.
async fn scraped(metrics: &str, series: &str) -> Option<f64> {
    let scrape = support::answer(client().get(format!("{metrics}/metrics"))).await;
    scrape
        .text()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// What `metrics` counted of `tool`'s checks: first calls and repeats, once they are `calls`.
async fn checks(metrics: &[&str], tool: &str, calls: f64) -> [f64; 2] {
    let series = |result: &str| {
        format!(
            "idempotency_duplicate_checks_total{{operation=\"POST /tools/{tool}\",result=\"{result}\"}}"
        )
    };
    eventually("every call counted", Duration::from_secs(10), || async {
        let mut found = [0.0; 2];
        for metrics in metrics {
            found[0] += scraped(metrics, &series("first")).await.unwrap_or(0.0);
            found[1] += scraped(metrics, &series("repeat")).await.unwrap_or(0.0);
        }
        (found[0] + found[1] == calls).then_some(found)
    })
    .await
}

#[tokio::test]
async fn in_observe_mode_every_call_reaches_the_tool_and_repeats_are_counted() {
    let upstream = Upstream::tools(0);
    let flags = ["--observe", "--metrics-listen", "127.0.0.1:0"];
    let proxy = Proxy::in_front_of(&upstream.url(), &flags);
    for _ in 0..3 {
        let sent = post(&proxy.url, "/tools/send_email", Some("s1"), EMAIL).await;
        assert_eq!(sent.status, 200, "{sent:?}");
        assert!(!sent.replayed());
        assert_eq!(sent.header("idempotency-intent"), None, "nothing added");
    }
    let failed = post(&proxy.url, "/tools/flaky", Some("s1"), "{}").await;
    assert_eq!(failed.status, 503, "the upstream's own failure");
    post(&proxy.url, "/tools/flaky", Some("s1"), "{}").await;
    let anonymous = post(&proxy.url, "/tools/send_email", None, EMAIL).await;
    assert_eq!(anonymous.status, 200, "not refused for its missing session");
    let ran = stats(&upstream.url()).await;
    assert_eq!(
        (ran["send_email"].as_u64(), ran["flaky"].as_u64()),
        (Some(4), Some(2))
    );
    let metrics = proxy.metrics.clone().unwrap();
    assert_eq!(checks(&[&metrics], "send_email", 3.0).await, [1.0, 2.0]);
    assert_eq!(checks(&[&metrics], "flaky", 2.0).await, [1.0, 1.0]);
    let unkeyable =
        r#"idempotency_duplicate_checks_total{operation="(no scope)",result="not_keyable"}"#;
    assert_eq!(scraped(&metrics, unkeyable).await, Some(1.0));
    assert!(
        scraped(
            &metrics,
            r#"idempotency_duplicate_attempts_bucket{operation="POST /tools/send_email",le="2"}"#
        )
        .await
        .is_some(),
        "the attempts histogram has buckets"
    );
}

#[tokio::test]
async fn two_proxies_on_one_redis_count_repeats_that_alternate_between_them() {
    let redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    let start = || {
        let flags = [
            "--observe",
            "--redis-url",
            &redis.url(),
            "--metrics-listen",
            "127.0.0.1:0",
        ];
        Proxy::in_front_of(&upstream.url(), &flags)
    };
    let (one, two) = (start(), start());
    for n in 0..6 {
        let proxy = if n % 2 == 0 { &one } else { &two };
        let sent = post(&proxy.url, "/tools/send_email", Some("s1"), EMAIL).await;
        assert_eq!(sent.status, 200, "{sent:?}");
    }
    assert_eq!(stats(&upstream.url()).await["send_email"], 6);
    let metrics = [one.metrics.clone().unwrap(), two.metrics.clone().unwrap()];
    let both = [metrics[0].as_str(), metrics[1].as_str()];
    assert_eq!(checks(&both, "send_email", 6.0).await, [1.0, 5.0]);
}

#[test]
fn observe_is_refused_on_a_route_that_keys_nothing() {
    let config = support::config_file(
        "[upstream]\nurl = \"http://127.0.0.1:9\"\n[[routes]]\nprefix = \"/files\"\nmode = \"pass\"\nobserve = true\n",
    );
    let (code, stderr) = support::refused(&["--config", config.path().to_str().unwrap()]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("observe"), "{stderr}");
}

#[tokio::test]
async fn under_observing_defaults_an_enforcing_routes_status_path_is_answered_by_the_layer() {
    let upstream = Upstream::tools(0);
    let (proxy, _config) = support::proxy_with_config(
        &upstream.url(),
        "[defaults]\nobserve = true\n[[routes]]\nprefix = \"/tools/send_email\"\nobserve = false\ndeadline = \"100ms\"\n",
    );
    let slow = r#"{"to":"ada@example.com","delay_ms":600}"#;
    let first = post(&proxy.url, "/tools/send_email", Some("s1"), slow).await;
    assert_eq!(
        first.status, 202,
        "the enforcing route answered in progress: {first:?}"
    );
    let location = first.header("location").expect("a status URL").to_owned();
    let asked = support::answer(
        client()
            .get(format!("{}{location}", proxy.url))
            .header("x-session-id", "s1"),
    )
    .await;
    assert!(
        asked.status == 202 || asked.status == 200,
        "the layer answers its status path: {asked:?}"
    );
}

//! Two proxy processes on one Redis (and on a 3-node Redis Cluster) in front of one
//! upstream: parallel identical calls spread over both run each intent once.

mod support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use support::process::eventually;
use support::redis_server::{RedisCluster, RedisServer};
use support::{post, stats, Proxy, Upstream};

#[tokio::test]
async fn two_proxies_on_one_redis_share_an_intents_failures_in_a_row() {
    let redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    let text = format!(
        "[store]\nredis_url = \"{}\"\n[defaults]\nretry_backoff = \"2s\"\nmax_failures = 3\nfailure_cooldown = \"1h\"\n",
        redis.url()
    );
    let (one, _one_config) = support::proxy_with_config(&upstream.url(), &text);
    let (two, _two_config) = support::proxy_with_config(&upstream.url(), &text);
    let call = |proxy: &Proxy| {
        let url = proxy.url.clone();
        async move { post(&url, "/tools/broken", Some("s1"), "{}").await }
    };
    // One failure on each proxy: the second ran at once.
    assert_eq!(call(&one).await.status, 500);
    assert_eq!(call(&two).await.status, 500);
    // Two failures in a row, written by the second proxy, hold the first back for 2 s.
    let held = call(&one).await;
    assert_eq!(held.status, 429, "{held:?}");
    assert_eq!(held.header("retry-after"), Some("2"));
    assert!(
        held.text().contains("its last 2 attempts in a row"),
        "{held:?}"
    );
    assert_eq!(stats(&upstream.url()).await["broken"], 2);
    // Past the wait, the third attempt runs, through either proxy; then both hold it back
    // for the cooldown.
    let third = eventually(
        "the third attempt runs",
        Duration::from_secs(10),
        || async {
            let answer = call(&one).await;
            (answer.status != 429).then_some(answer)
        },
    )
    .await;
    assert_eq!(third.status, 500);
    for proxy in [&one, &two] {
        let held = call(proxy).await;
        assert_eq!(held.status, 429, "{held:?}");
        assert_eq!(held.header("retry-after"), Some("3600"));
    }
    assert_eq!(stats(&upstream.url()).await["broken"], 3);
}

const INTENTS: usize = 10;
const CALLS_PER_INTENT: usize = 8;

async fn each_intent_runs_once(store_args: &[&str]) {
    let upstream = Upstream::tools(0);
    let url = upstream.url();
    let proxies = [
        Proxy::in_front_of(&url, store_args),
        Proxy::in_front_of(&url, store_args),
    ];
    let calls = (0..INTENTS * CALLS_PER_INTENT).map(|n| {
        let intent = n % INTENTS;
        // Each intent's calls alternate between the two proxies.
        let proxy = &proxies[(n / INTENTS) % 2].url;
        async move {
            let body = format!(r#"{{"to":"user{intent}@example.com","delay_ms":300}}"#);
            let answer = post(proxy, "/tools/send_email", Some("s1"), &body).await;
            (intent, answer)
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    let mut bodies: HashMap<usize, HashSet<String>> = HashMap::new();
    for (intent, answer) in answers {
        assert_eq!(answer.status, 200, "{answer:?}");
        bodies
            .entry(intent)
            .or_default()
            .insert(answer.text().to_owned());
    }
    for (intent, seen) in &bodies {
        assert_eq!(seen.len(), 1, "intent {intent} got {seen:?}");
    }
    assert_eq!(stats(&url).await["send_email"], INTENTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_redis_run_each_intent_once() {
    let redis = RedisServer::start();
    let url = redis.url();
    each_intent_runs_once(&["--redis-url", &url]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_redis_cluster_run_each_intent_once() {
    let cluster = RedisCluster::start();
    let urls = cluster.urls().join(",");
    each_intent_runs_once(&["--redis-cluster-urls", &urls]).await;
}

#[tokio::test]
async fn proxies_in_front_of_different_upstreams_on_one_redis_never_share_a_result() {
    // The same route, session and body sent to two services: two actions, one each. By
    // default each proxy's keys are prefixed by its upstream.
    let redis = RedisServer::start();
    let url = redis.url();
    let (mail, billing) = (Upstream::tools(0), Upstream::tools(0));
    let proxies = [
        Proxy::in_front_of(&mail.url(), &["--redis-url", &url]),
        Proxy::in_front_of(&billing.url(), &["--redis-url", &url]),
    ];
    let body = r#"{"to":"ada@example.com"}"#;
    for proxy in &proxies {
        let answer = post(&proxy.url, "/tools/send_email", Some("s1"), body).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(
            !answer.replayed(),
            "not another service's result: {answer:?}"
        );
    }
    assert_eq!(stats(&mail.url()).await["send_email"], 1);
    assert_eq!(stats(&billing.url()).await["send_email"], 1);
}

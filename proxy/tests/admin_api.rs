//! The admin API on the metrics listener, as an operator uses it: refused without the token;
//! an outcome that is not known listed as `unknown`, resolved as not run so that its retry runs
//! once, or as run so that repeats are told so; a caller's records purged, the other callers'
//! left alone. On the memory store, on Redis and on a Redis Cluster.

mod support;

use http::StatusCode;
use serde_json::Value;
use support::redis_server::{RedisCluster, RedisServer};
use support::{answer, client, post, proxy_with_config, stats, Answer, Proxy, Upstream};

const TOKEN: &str = "an-operators-long-random-token";

/// The proxy in front of the tool server, its metrics listener serving the admin API; a
/// `hang` call is given up after 500 ms and kept as "may have run".
fn proxy(upstream: &Upstream, store: &str) -> (Proxy, tempfile::NamedTempFile) {
    let file = format!(
        "metrics_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n{store}\n\
         [upstream]\nconnect_timeout = \"200ms\"\n\
         [[routes]]\nprefix = \"/tools/hang\"\ntimeout = \"500ms\"\ndeadline = \"10s\"\n"
    );
    proxy_with_config(&upstream.url(), &file)
}

async fn admin(proxy: &Proxy, path: &str, token: Option<&str>, body: Option<&str>) -> Answer {
    let url = format!(
        "{}{path}",
        proxy.metrics.as_ref().expect("a metrics listener")
    );
    let mut request = match body {
        Some(body) => client()
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_owned()),
        None => client().get(url),
    };
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    answer(request).await
}

async fn listed(proxy: &Proxy, query: &str) -> Vec<Value> {
    let listing = admin(proxy, &format!("/admin/records{query}"), Some(TOKEN), None).await;
    assert_eq!(listing.status, StatusCode::OK, "{}", listing.text());
    listing.json()["records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

async fn ran(upstream: &Upstream, tool: &str) -> u64 {
    stats(&upstream.url()).await[tool].as_u64().unwrap_or(0)
}

async fn an_operator_lists_resolves_and_purges(store: &str) {
    let upstream = Upstream::tools(0);
    let (proxy, _file) = proxy(&upstream, store);

    // Without the token, or with another, nothing is shown.
    let refused = admin(&proxy, "/admin/records", None, None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let wrong = admin(&proxy, "/admin/records", Some("not-the-token"), None).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);

    // A call the upstream never answered is kept as "may have run", and listed so.
    let hang = r#"{"delay_ms":3000}"#;
    let lost = post(&proxy.url, "/tools/hang", Some("s1"), hang).await;
    assert_eq!(lost.json()["outcome"], "unknown", "{}", lost.text());
    let intent = lost.intent().to_owned();
    let unknown = listed(&proxy, "?outcome=unknown").await;
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert_eq!(unknown[0]["intent"], intent.as_str());
    assert_eq!(unknown[0]["outcome"], "unknown");
    assert_eq!(unknown[0]["status"], 504, "{unknown:?}");
    let operation = unknown[0]["operation"].as_str().unwrap_or_default();
    assert!(operation.contains("/tools/hang"), "{operation}");
    assert!(unknown[0].get("body").is_none(), "no bodies unless asked");
    assert!(listed(&proxy, "?outcome=kept").await.is_empty());

    // Resolved as not run: its retry runs, once.
    assert_eq!(ran(&upstream, "hang").await, 1);
    let resolve = format!("/admin/records/{intent}/resolve");
    let released = admin(&proxy, &resolve, Some(TOKEN), Some(r#"{"ran": false}"#)).await;
    assert_eq!(
        released.json()["resolved"],
        "released",
        "{}",
        released.text()
    );
    let retried = post(&proxy.url, "/tools/hang", Some("s1"), hang).await;
    assert_eq!(retried.json()["outcome"], "unknown");
    assert_eq!(ran(&upstream, "hang").await, 2, "the retry ran once");

    // Resolved as run: repeats are told it ran, and nothing runs.
    let note = r#"{"ran": true, "note": "checked by hand"}"#;
    let kept = admin(&proxy, &resolve, Some(TOKEN), Some(note)).await;
    assert_eq!(kept.json()["resolved"], "kept_as_run", "{}", kept.text());
    let repeat = post(&proxy.url, "/tools/hang", Some("s1"), hang).await;
    let told = repeat.json();
    assert_eq!(told["outcome"], "already_executed", "{told}");
    assert!(told["detail"].as_str().unwrap().contains("an operator"));
    assert_eq!(ran(&upstream, "hang").await, 2);
    let shown = admin(
        &proxy,
        &format!("/admin/records/{intent}"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(shown.json()["note"], "checked by hand", "{}", shown.text());
    assert_eq!(shown.json()["outcome"], "kept");

    // A purge of one caller: its replays are gone, the other caller's are not.
    let email = r#"{"to":"a@example.com","subject":"hi"}"#;
    for session in ["s1", "s2"] {
        post(&proxy.url, "/tools/send_email", Some(session), email).await;
    }
    assert_eq!(ran(&upstream, "send_email").await, 2);
    let body = r#"{"scope": "s1"}"#;
    let purged = admin(&proxy, "/admin/scopes/purge", Some(TOKEN), Some(body)).await;
    assert_eq!(purged.json()["removed"], 2, "{}", purged.text());
    let mine = post(&proxy.url, "/tools/send_email", Some("s1"), email).await;
    assert!(!mine.replayed(), "the purged caller's call runs again");
    let theirs = post(&proxy.url, "/tools/send_email", Some("s2"), email).await;
    assert!(theirs.replayed(), "the other caller's record stays");
    assert_eq!(ran(&upstream, "send_email").await, 3);
    assert!(!(listed(&proxy, "").await.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_resolves_and_purges_on_the_memory_store() {
    an_operator_lists_resolves_and_purges("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_resolves_and_purges_on_redis() {
    let redis = RedisServer::start();
    let store = format!("[store]\nredis_url = \"{}\"", redis.url());
    an_operator_lists_resolves_and_purges(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_resolves_and_purges_on_a_redis_cluster() {
    let cluster = RedisCluster::start();
    let urls: Vec<String> = cluster
        .urls()
        .iter()
        .map(|url| format!("\"{url}\""))
        .collect();
    let store = format!("[store]\nredis_cluster_urls = [{}]", urls.join(", "));
    an_operator_lists_resolves_and_purges(&store).await;
}

#[test]
fn an_admin_token_needs_the_metrics_listener() {
    let (code, stderr) =
        support::refused(&["--upstream", "http://127.0.0.1:1", "--admin-token", TOKEN]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_reaches_another_proxys_local_cache_within_its_local_ttl() {
    let redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    let store = format!(
        "[store]\nredis_url = \"{}\"\nlocal_ttl = \"1s\"",
        redis.url()
    );
    let (operated, _one) = proxy(&upstream, &store);
    let (other, _two) = proxy(&upstream, &store);
    let email = r#"{"to":"a@example.com","subject":"hi"}"#;
    let first = post(&operated.url, "/tools/send_email", Some("s1"), email).await;
    // The other proxy replays it, and keeps a copy.
    assert!(post(&other.url, "/tools/send_email", Some("s1"), email)
        .await
        .replayed());
    let record = format!(
        "{}/admin/records/{}",
        operated.metrics.as_ref().expect("a metrics listener"),
        first.intent()
    );
    let confirm = format!(r#"{{"confirm": "{}"}}"#, first.intent());
    let removal = client().delete(record).bearer_auth(TOKEN).body(confirm);
    assert_eq!(answer(removal).await.json()["removed"], "kept");
    let limit = std::time::Duration::from_secs(10);
    support::process::eventually("the other proxy runs it again", limit, || async {
        let again = post(&other.url, "/tools/send_email", Some("s1"), email).await;
        (!again.replayed()).then_some(())
    })
    .await;
    assert_eq!(ran(&upstream, "send_email").await, 2, "run again once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_on_one_proxy_is_seen_by_another_on_one_redis_within_a_second() {
    let redis = RedisServer::start();
    let upstream = Upstream::tools(0);
    // Both at their defaults but for the store.
    let store = format!("[store]\nredis_url = \"{}\"", redis.url());
    let (operated, _one) = proxy(&upstream, &store);
    let (other, _two) = proxy(&upstream, &store);
    let hang = r#"{"delay_ms":3000}"#;
    let lost = post(&operated.url, "/tools/hang", Some("s1"), hang).await;
    assert_eq!(lost.json()["outcome"], "unknown", "{}", lost.text());
    // The other proxy is told the same, and keeps a copy.
    let told = post(&other.url, "/tools/hang", Some("s1"), hang).await;
    assert_eq!(told.json()["outcome"], "unknown", "{}", told.text());
    let resolve = format!("/admin/records/{}/resolve", lost.intent());
    let released = admin(&operated, &resolve, Some(TOKEN), Some(r#"{"ran": false}"#)).await;
    assert_eq!(
        released.json()["resolved"],
        "released",
        "{}",
        released.text()
    );
    // When the call that ran again was sent, counted from the release's answer.
    let since = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(10);
    let (other, upstream) = (&other, &upstream);
    let sent = support::process::eventually("the release reaching the other proxy", limit, || {
        let sent = since.elapsed();
        async move {
            post(&other.url, "/tools/hang", Some("s1"), hang).await;
            (ran(upstream, "hang").await == 2).then_some(sent)
        }
    })
    .await;
    assert!(
        sent < std::time::Duration::from_secs(1),
        "the release reached the other proxy after {sent:?}"
    );
}

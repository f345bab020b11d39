//! The proxy in HTTP mode in front of a Python tool server, both real processes on loopback:
//! the tool gateway's contract, through a proxy the upstream knows nothing of.

mod support;

use std::time::Duration;

use support::process::eventually;
use support::{answer, client, post, stats, Proxy, Upstream};

fn proxy_for(upstream: &Upstream, extra: &[&str]) -> Proxy {
    Proxy::in_front_of(&upstream.url(), extra)
}

const EMAIL: &str = r#"{"to":"ada@example.com","subject":"Q3","body":"Numbers attached."}"#;

#[tokio::test]
async fn a_retry_is_replayed_and_the_tool_runs_once() {
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &[]);
    let first = post(&proxy.url, "/tools/send_email", Some("s1"), EMAIL).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert!(!first.replayed());
    let again = post(&proxy.url, "/tools/send_email", Some("s1"), EMAIL).await;
    assert_eq!(again.status, 200);
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, first.body);
    assert_eq!(stats(&upstream.url()).await["send_email"], 1);
}

#[tokio::test]
async fn the_same_json_spelt_otherwise_is_the_same_intent() {
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &[]);
    post(&proxy.url, "/tools/send_email", Some("s1"), EMAIL).await;
    let respelled = r#"{ "body" : "Numbers attached.", "subject":"Q3",  "to":"ada@example.com" }"#;
    let again = post(&proxy.url, "/tools/send_email", Some("s1"), respelled).await;
    assert!(again.replayed(), "{again:?}");
    let other = r#"{"to":"ada@example.com","subject":"Q4","body":"Numbers attached."}"#;
    let different = post(&proxy.url, "/tools/send_email", Some("s1"), other).await;
    assert!(!different.replayed());
    assert_eq!(stats(&upstream.url()).await["send_email"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_wait_for_one_execution() {
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &[]);
    let slow = r#"{"to":"ada@example.com","delay_ms":500}"#;
    let calls = (0..8).map(|_| post(&proxy.url, "/tools/send_email", Some("s1"), slow));
    let answers = futures_util::future::join_all(calls).await;
    let bodies: std::collections::HashSet<_> = answers
        .iter()
        .map(|a| {
            assert_eq!(a.status, 200, "{a:?}");
            a.body.clone()
        })
        .collect();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(stats(&upstream.url()).await["send_email"], 1);
}

#[tokio::test]
async fn past_the_deadline_the_caller_is_told_in_progress_and_the_status_path_gives_the_result() {
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &["--deadline", "200ms"]);
    let slow = r#"{"to":"ada@example.com","delay_ms":1200}"#;
    let first = post(&proxy.url, "/tools/send_email", Some("s1"), slow).await;
    assert_eq!(first.status, 202, "{first:?}");
    assert_eq!(first.json()["outcome"], "in_progress");
    let location = first.header("location").expect("a status URL").to_owned();
    let done = eventually(
        "the result on the status path",
        Duration::from_secs(4),
        || async {
            let status = support::answer(
                support::client()
                    .get(format!("{}{location}", proxy.url))
                    .header("x-session-id", "s1"),
            )
            .await;
            if status.status != 200 {
                assert_eq!(status.status, 202, "{status:?}");
                return None;
            }
            Some(status)
        },
    )
    .await;
    assert_eq!(done.json()["status"], "sent");
    let again = post(&proxy.url, "/tools/send_email", Some("s1"), slow).await;
    assert!(again.replayed());
    assert_eq!(stats(&upstream.url()).await["send_email"], 1);
}

#[tokio::test]
async fn a_server_error_releases_the_key_and_a_client_error_is_kept() {
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &[]);
    let first = post(&proxy.url, "/tools/flaky", Some("s1"), "{}").await;
    assert_eq!(first.status, 503);
    let second = post(&proxy.url, "/tools/flaky", Some("s1"), "{}").await;
    assert_eq!(second.status, 200, "{second:?}");
    assert!(!second.replayed());
    let refused = post(&proxy.url, "/tools/reject", Some("s1"), "{}").await;
    let again = post(&proxy.url, "/tools/reject", Some("s1"), "{}").await;
    assert_eq!((refused.status.as_u16(), again.status.as_u16()), (400, 400));
    assert!(again.replayed());
    let counts = stats(&upstream.url()).await;
    assert_eq!(
        (counts["flaky"].clone(), counts["reject"].clone()),
        (2.into(), 1.into())
    );
}

#[tokio::test]
async fn sessions_never_share_an_intent() {
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &[]);
    let a = post(&proxy.url, "/tools/send_email", Some("alice"), EMAIL).await;
    let b = post(&proxy.url, "/tools/send_email", Some("bob"), EMAIL).await;
    assert!(!a.replayed() && !b.replayed());
    assert_ne!(a.body, b.body);
    assert_eq!(stats(&upstream.url()).await["send_email"], 2);
}

#[tokio::test]
async fn two_credentials_sending_one_session_value_never_share_an_answer() {
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &[]);
    let call = |credential: &'static str| {
        let request = client()
            .post(format!("{}/tools/send_email", proxy.url))
            .header("content-type", "application/json")
            .header("authorization", credential)
            .header("x-session-id", "default")
            .body(EMAIL);
        answer(request)
    };
    let a = call("Bearer A").await;
    let b = call("Bearer B").await;
    assert!(!b.replayed(), "{b:?}");
    assert_ne!(a.body, b.body);
    assert!(call("Bearer A").await.replayed());
    assert_eq!(stats(&upstream.url()).await["send_email"], 2);
}

#[tokio::test]
async fn a_body_over_the_limit_and_a_missing_scope_are_refused_with_nothing_run() {
    let upstream = Upstream::tools(0);
    let (proxy, _config) = support::proxy_with_config(&upstream.url(), "[limits]\nbody = 1024\n");
    let big = format!(
        r#"{{"to":"ada@example.com","body":"{}"}}"#,
        "x".repeat(4096)
    );
    let too_large = post(&proxy.url, "/tools/send_email", Some("s1"), &big).await;
    assert_eq!(too_large.status, 413, "{too_large:?}");
    assert_eq!(too_large.json()["outcome"], "not_executed");
    let unscoped = post(&proxy.url, "/tools/send_email", None, EMAIL).await;
    assert_eq!(unscoped.status, 400, "{unscoped:?}");
    assert_eq!(unscoped.json()["outcome"], "not_executed");
    assert!(stats(&upstream.url()).await.get("send_email").is_none());
}

#[tokio::test]
async fn a_urllib3_client_retrying_on_its_own_read_timeout_sends_the_email_once() {
    let Some(python) = support::python_with("import urllib3", "urllib3") else {
        return;
    };
    let upstream = Upstream::tools(0);
    let proxy = proxy_for(&upstream, &[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/upstreams/retrying_client.py"
    );
    let url = format!("{}/tools/send_email", proxy.url);
    let body = r#"{"to":"ada@example.com","subject":"Q3","delay_ms":1500}"#;
    let output = tokio::process::Command::new(python)
        .args([script, &url, "s1", body])
        .output()
        .await
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("{stdout} {}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(report["status"], 200, "{report}");
    assert!(
        report["attempts"].as_u64().unwrap() >= 3,
        "it timed out and retried: {report}"
    );
    assert_eq!(stats(&upstream.url()).await["send_email"], 1, "{report}");
}

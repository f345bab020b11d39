//! Arguments checked against the listed `inputSchema`: an MCP server built on the official
//! Python SDK's low-level `Server` (`upstreams/checked_server.py`, which runs whatever reaches
//! it), behind `idempotency-proxy --mcp /mcp --mcp-validate-arguments` or the crate's layer
//! with `validate_arguments(true)`, driven by the SDK's client.

mod support;

#[path = "conformance/layered.rs"]
#[allow(
    dead_code,
    reason = "the conformance test's plain way is not used here"
)]
mod layered;

use std::time::Duration;

use serde_json::Value;
use support::process::eventually;
use support::sdk_clients::{self, Sdk, Speaking, HANDSHAKE, STATELESS};
use support::{client, Proxy, Upstream};
use tower_idempotency::IdempotencyLayer;

/// What the layer's answer to a refused call begins with.
const NOT_RUN: &str =
    "The tool was not run because its arguments do not match the tool's inputSchema";

/// The SDK's client, where the SDK (and so its server) is installed.
fn python_client() -> Option<Sdk> {
    sdk_clients::python()
}

/// The server, and a proxy in front of it serving `/mcp` with `flags`, its metrics listened
/// to.
fn behind_proxy(flags: &[&str]) -> (Upstream, Proxy) {
    let upstream = Upstream::start("checked_server.py", &[]);
    let mut args = vec!["--mcp", "/mcp", "--metrics-listen", "127.0.0.1:0"];
    args.extend_from_slice(flags);
    let proxy = Proxy::in_front_of(&upstream.url(), &args);
    (upstream, proxy)
}

/// A scenario of the Python client at `url`, spoken as `how` says.
fn scenario(python: &Sdk, url: &str, name: &str, how: Speaking) -> Value {
    how.spoke(sdk_clients::run(python, url, name, how.args))
}

/// The text and `isError` of the answer the scenario reported as `call`.
fn answer<'a>(report: &'a Value, call: &str) -> (&'a str, bool) {
    let answered = &report["calls"][call];
    let text = answered["text"].as_str().unwrap_or_default();
    (text, answered["is_error"] == true)
}

/// Checks a `bad_arguments` report: each bad call was answered `isError: true` naming the
/// argument at fault, the good one ran, and the server saw it alone.
fn refused_unrun(report: &Value) {
    let (text, is_error) = answer(report, "low_count");
    assert!(is_error, "{report}");
    assert!(text.starts_with(NOT_RUN), "{report}");
    assert!(
        text.contains("\n/count: is below the minimum of 1"),
        "{report}"
    );
    let (text, is_error) = answer(report, "no_to");
    assert!(is_error && text.starts_with(NOT_RUN), "{report}");
    assert!(text.contains("\n/to: is required but missing"), "{report}");
    let (text, is_error) = answer(report, "good");
    assert!(!is_error && text.starts_with("sent to args-"), "{report}");
    let ran = &report["stats"]["arguments"];
    assert_eq!(ran.as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(
        ran[0]["count"], 2,
        "the good call alone reached the server: {report}"
    );
}

/// The value of `series` on the proxy's scrape, once it is `wanted`.
async fn counted(metrics: &str, series: &str, wanted: f64) {
    eventually(series, Duration::from_secs(10), || async {
        let scrape = support::answer(client().get(format!("{metrics}/metrics"))).await;
        let value = scrape
            .text()
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse::<f64>().ok());
        (value == Some(wanted)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_whose_arguments_break_the_tools_schema_is_answered_is_error_and_never_reaches_the_server(
) {
    let Some(python) = python_client() else {
        return;
    };
    for how in [STATELESS, HANDSHAKE] {
        let (_upstream, proxy) = behind_proxy(&["--mcp-validate-arguments"]);
        let url = format!("{}/mcp", proxy.url);
        let report = tokio::task::block_in_place(|| scenario(&python, &url, "bad_arguments", how));
        refused_unrun(&report);
        let metrics = proxy.metrics.as_deref().expect("a metrics listener");
        let series = |reason: &str| {
            format!(
                "idempotency_rejected_by_schema_total{{operation=\"tools/call send_mail\",reason=\"{reason}\"}}"
            )
        };
        counted(metrics, &series("range"), 1.0).await;
        counted(metrics, &series("required"), 1.0).await;
        counted(metrics, &series("format"), 0.0).await;
    }
}

#[test]
fn the_crate_layer_with_validate_arguments_answers_the_same() {
    let Some(python) = python_client() else {
        return;
    };
    let upstream = Upstream::start("checked_server.py", &[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let layer = IdempotencyLayer::new().mcp().validate_arguments(true);
    let url = runtime.block_on(layered::serve_behind(upstream.url(), layer));
    refused_unrun(&scenario(&python, &url, "bad_arguments", STATELESS));
}

#[test]
fn without_validate_arguments_every_call_reaches_the_server() {
    let Some(python) = python_client() else {
        return;
    };
    let (_upstream, proxy) = behind_proxy(&[]);
    let url = format!("{}/mcp", proxy.url);
    let report = scenario(&python, &url, "bad_arguments", STATELESS);
    let (text, _) = answer(&report, "low_count");
    assert!(text.starts_with("sent to args-"), "{report}");
    assert_eq!(report["stats"]["send_mail"], 3, "{report}");
}

/// Checks a `changed_schema_on_*` report: once the server said its tools changed, a call
/// that only the changed schema allows ran though the tools were not listed again, and, once
/// they were, a call that only the first schema allowed was refused.
fn changed_schema_used(report: &Value) {
    let (text, is_error) = answer(report, "now_allowed");
    assert!(
        !is_error && text.starts_with("sent to changed-"),
        "{report}"
    );
    let (text, is_error) = answer(report, "no_longer_allowed");
    assert!(is_error && text.starts_with(NOT_RUN), "{report}");
    assert!(
        text.contains("\n/count: is above the maximum of 3"),
        "{report}"
    );
    assert_eq!(report["stats"]["send_mail"], 1, "{report}");
}

#[test]
fn once_the_server_says_its_tools_changed_the_changed_schema_is_used() {
    let Some(python) = python_client() else {
        return;
    };
    // Said on the changing call's own stream, on the session's GET stream (the handshake
    // era), or on a `subscriptions/listen` stream the client opened (2026-07-28).
    let ways = [
        ("changed_schema_on_call", HANDSHAKE),
        ("changed_schema_on_session", HANDSHAKE),
        ("changed_schema_on_listen", STATELESS),
    ];
    for (name, how) in ways {
        let (_upstream, proxy) = behind_proxy(&["--mcp-validate-arguments"]);
        let url = format!("{}/mcp", proxy.url);
        changed_schema_used(&scenario(&python, &url, name, how));
    }
}

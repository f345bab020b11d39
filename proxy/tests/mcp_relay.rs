//! What an MCP server says during a protected call reaches its caller through the proxy:
//! progress as it is sent, and the server's own requests (an elicitation), again to a retry
//! when the first caller gave up. The Python SDK's server behind `idempotency-proxy --mcp
//! /mcp`, driven by the Python SDK's client in the handshake era, where a server asks its
//! client on the call's event stream.

mod support;

use serde_json::Value;
use support::sdk_clients::{self, HANDSHAKE};
use support::{Proxy, Upstream};

/// One scenario of the Python client, in the handshake era, against the Python SDK server
/// behind a proxy with `flags`; what the client reported.
fn scenario(name: &str, flags: &[&str]) -> Option<Value> {
    let python = sdk_clients::python()?;
    let upstream = Upstream::start("mcp_server.py", &[]);
    let mut args = vec!["--mcp", "/mcp"];
    args.extend_from_slice(flags);
    let proxy = Proxy::in_front_of(&upstream.url(), &args);
    let report = sdk_clients::run(&python, &format!("{}/mcp", proxy.url), name, HANDSHAKE.args);
    Some(HANDSHAKE.spoke(report))
}

#[test]
fn a_question_the_tool_asks_is_asked_again_of_the_retry_which_answers_it_and_the_tool_runs_once() {
    // A deadline shorter than the user takes too: the question waits on the caller.
    let Some(report) = scenario("elicit_retry", &["--deadline", "500ms"]) else {
        return;
    };
    let asks = report["asks"].as_array().expect("asks");
    assert!(asks.len() >= 2, "asked again of the retry: {report}");
    assert!(
        asks.iter().all(|ask| ask["id"] == asks[0]["id"]),
        "with the server's own id: {report}"
    );
    let attempts = report["attempts"].as_u64().unwrap();
    assert!(attempts >= 2, "the first attempt timed out: {report}");
    assert_eq!(report["texts"][0], "timeout", "{report}");
    // The question waited on the user: the retry is never told "in progress" meanwhile.
    let texts = report["texts"].as_array().unwrap();
    assert!(
        texts.iter().all(|text| !text
            .as_str()
            .unwrap_or_default()
            .starts_with("This action is already running")),
        "held back: {report}"
    );
    let answered = format!("yes-{}", asks.len());
    let text = report["final_text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("with {answered}")),
        "the retry's answer: {report}"
    );
    assert_eq!(report["stats"]["confirm_send"], 1, "ran once: {report}");
    assert_eq!(
        report["stats"]["confirmed_with"],
        serde_json::json!([answered]),
        "{report}"
    );
}

#[test]
fn progress_reaches_the_caller_in_order_as_it_is_sent_and_its_duplicate_gets_only_the_answer() {
    let Some(report) = scenario("progress_order", &[]) else {
        return;
    };
    let first = report["progress"]["first"].as_array().expect("progress");
    let steps: Vec<f64> = first
        .iter()
        .map(|seen| seen["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "in order: {report}");
    let at: Vec<f64> = first
        .iter()
        .map(|seen| seen["at"].as_f64().unwrap())
        .collect();
    // Sent every half second: as they come, not all at the end.
    assert!(at[5] - at[0] >= 1.5, "spread as sent: {report}");
    assert!(at[0] < 1.5, "the first one early: {report}");
    assert_eq!(
        report["progress"]["duplicate"],
        serde_json::json!([]),
        "the duplicate gets only the answer: {report}"
    );
    let texts = report["texts"].as_array().unwrap();
    for text in texts {
        assert!(
            text.as_str()
                .unwrap_or_default()
                .contains("report on progress-"),
            "{report}"
        );
    }
    assert_eq!(report["stats"]["slow_progress"], 1, "ran once: {report}");
}

//! The MCP mode against a client we did not write: the official Python MCP SDK
//! (`tests/interop/python_client.py`), driving the `mcp_server` example with the SDK's own
//! request timeout, so the cancellations are the ones the SDK sends by itself.
//!
//! The SDK lives in a virtual environment outside the repository: `MCP_PYTHON` names its
//! interpreter (default `~/.cache/tower-idempotency/venv/bin/python`); `bash .ci/run` makes
//! it. Without it these tests say so and pass, except under `CI=true`, where they fail.
#![cfg(feature = "mcp")]

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use support::gateway::start_example;

/// Succeeds where the SDK the client script is written for is installed.
const SDK_CHECK: &str =
    "import importlib.metadata as m, mcp.client.streamable_http; assert m.version('mcp') == '2.3.0'";

/// The interpreter of the environment that holds the SDK, or `None` where it is missing
/// outside CI.
fn python() -> Option<PathBuf> {
    let python = std::env::var_os("MCP_PYTHON").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/tower-idempotency/venv/bin/python")
        },
        PathBuf::from,
    );
    let has_sdk = Command::new(&python)
        .args(["-c", SDK_CHECK])
        .output()
        .is_ok_and(|output| output.status.success());
    if has_sdk {
        return Some(python);
    }
    let missing = format!(
        "the official Python MCP SDK is not installed at {} (set MCP_PYTHON, or run \
         `python3 -m venv ~/.cache/tower-idempotency/venv && \
         ~/.cache/tower-idempotency/venv/bin/pip install mcp==2.3.0`)",
        python.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{missing}");
    eprintln!("skipped: {missing}");
    None
}

/// A bearer token, as a client that authenticates sends it: the scope of a 2026-07-28 call,
/// which has no session.
const ALICE: &str = "Authorization=Bearer alice-token";
const BOB: &str = "Authorization=Bearer bob-token";

/// Runs one scenario of the Python client (`args` added to its command line) against a fresh
/// `mcp_server` with a 500 ms deadline (and `env`), and returns what it reported.
fn scenario_with(python: &PathBuf, name: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut env = env.to_vec();
    env.push(("DEADLINE_MS", "500"));
    let server = start_example("mcp_server", &env);
    run_client(python, &server.client.base, name, args)
}

/// Runs one scenario of the Python client against the MCP endpoint `url`.
fn run_client(python: &PathBuf, url: &str, name: &str, args: &[&str]) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/python_client.py"
    );
    let output = Command::new(python)
        .args([script, "--url", url, "--scenario", name])
        .args(args)
        // Loopback traffic never goes through a proxy the environment may name.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .output()
        .expect("the Python client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{name} could not run:\n{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {stdout}\n{stderr}"))
}

/// A scenario in the SDK's default mode (2026-07-28 against this server), as Alice.
fn scenario(python: &PathBuf, name: &str) -> Value {
    let report = scenario_with(python, name, &["--header", ALICE], &[]);
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    report
}

/// A scenario in the handshake era (`mode="legacy"`): the session names the caller.
fn legacy(python: &PathBuf, name: &str) -> Value {
    let report = scenario_with(python, name, &["--mode", "legacy"], &[]);
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    report
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// Checks a `timeout_retry` report: the SDK gave up at least once, the retry reached the
/// result, and the e-mail went out once, never cancelled halfway.
fn sent_once_despite_timeouts(report: &Value) {
    let final_text = text(&report["final_text"]);
    assert!(final_text.contains("Sent e-mail #1 to"), "{report}");
    assert!(
        report["attempts"].as_u64().unwrap() >= 2,
        "the SDK timed out at least once: {report}"
    );
    assert_eq!(report["stats"]["send_email"], 1, "{report}");
    assert_eq!(report["stats"]["cancelled"], 0, "{report}");
}

#[test]
fn an_sdk_client_whose_timeout_is_shorter_than_the_tool_retries_until_answered_and_it_runs_once() {
    let Some(python) = python() else { return };
    sent_once_despite_timeouts(&scenario(&python, "timeout_retry"));
}

#[test]
fn a_handshake_era_sdk_client_that_cancels_on_timeout_retries_and_it_runs_once() {
    let Some(python) = python() else { return };
    sent_once_despite_timeouts(&legacy(&python, "timeout_retry"));
}

/// Checks a `fresh_id_replay` report: the second call was told it is a replay of the first.
fn replayed_with_notice(report: &Value) {
    let texts = report["texts"].as_array().unwrap();
    assert!(text(&texts[0]).starts_with("Sent e-mail #1"), "{report}");
    let (notice, kept) = text(&texts[1])
        .split_once('\n')
        .expect("a notice, then the result");
    assert!(
        notice.starts_with("This exact call already ran"),
        "{report}"
    );
    assert_eq!(kept, text(&texts[0]), "{report}");
    assert_eq!(report["stats"]["send_email"], 1, "{report}");
}

#[test]
fn an_sdk_client_retrying_with_a_fresh_id_gets_the_replay() {
    let Some(python) = python() else { return };
    replayed_with_notice(&scenario(&python, "fresh_id_replay"));
}

#[test]
fn a_handshake_era_sdk_client_retrying_with_a_fresh_id_gets_the_replay() {
    let Some(python) = python() else { return };
    replayed_with_notice(&legacy(&python, "fresh_id_replay"));
}

/// Checks a `slow_in_progress` report: "in progress" first, as a result the SDK accepted
/// (not an exception), then the one real report.
fn in_progress_then_the_report(report: &Value) {
    let texts = report["texts"].as_array().unwrap();
    assert!(
        text(&texts[0]).starts_with("This action is already running"),
        "{report}"
    );
    assert_eq!(report["first_is_error"], false, "{report}");
    assert_eq!(
        report["first_structured_content"]["outcome"], "in_progress",
        "{report}"
    );
    let last = text(texts.last().unwrap());
    assert!(last.contains("Report #1 on"), "{report}");
    assert_eq!(report["stats"]["generate_report"], 1, "{report}");
}

#[test]
fn an_sdk_client_calling_a_slow_tool_is_told_in_progress_then_gets_the_result() {
    let Some(python) = python() else { return };
    in_progress_then_the_report(&scenario(&python, "slow_in_progress"));
}

#[test]
fn a_handshake_era_sdk_client_calling_a_slow_tool_is_told_in_progress_then_gets_the_result() {
    let Some(python) = python() else { return };
    in_progress_then_the_report(&legacy(&python, "slow_in_progress"));
}

#[test]
fn two_users_with_their_own_tokens_each_run_a_call_once_and_never_share_its_result() {
    let Some(python) = python() else { return };
    let args = ["--header", ALICE, "--other-header", BOB];
    let report = scenario_with(&python, "two_callers", &args, &[]);
    let texts = report["texts"].as_array().unwrap();
    assert!(text(&texts[0]).starts_with("Sent e-mail #1"), "{report}");
    assert!(text(&texts[1]).starts_with("Sent e-mail #2"), "{report}");
    assert!(
        text(&texts[2]).starts_with("This exact call already ran"),
        "{report}"
    );
    assert!(text(&texts[2]).ends_with(text(&texts[1])), "{report}");
    assert_eq!(report["stats"]["send_email"], 2, "{report}");
}

#[test]
fn a_stateless_call_that_nothing_names_the_caller_of_is_refused_with_a_result_the_sdk_reads() {
    let Some(python) = python() else { return };
    let report = scenario_with(&python, "one_call", &[], &[]);
    let refusal = text(&report["texts"][0]);
    assert!(refusal.starts_with("This call was not run"), "{report}");
    assert!(refusal.contains("--mcp-shared-scope"), "{report}");
    assert_eq!(report["is_error"], true, "{report}");
    assert_eq!(
        report["structured_content"]["outcome"], "not_executed",
        "{report}"
    );
    assert_eq!(report["stats"]["send_email"], 0, "{report}");
}

#[test]
fn a_one_user_server_with_a_shared_scope_protects_calls_that_carry_no_credential() {
    let Some(python) = python() else { return };
    let env = [("MCP_SHARED_SCOPE", "on")];
    let report = scenario_with(&python, "fresh_id_replay", &[], &env);
    replayed_with_notice(&report);
}

#[test]
fn a_result_kept_in_one_era_is_replayed_in_the_other_as_its_sdk_client_expects() {
    let Some(python) = python() else { return };
    let env = [("PRINCIPAL_HEADER", "x-user"), ("PRINCIPAL_ONLY", "on")];
    let server = start_example("mcp_server", &env);
    let url = &server.client.base;
    let as_alice = |mode: &'static str, suffix: &'static str| {
        let args = [
            "--mode",
            mode,
            "--header",
            "x-user=alice",
            "--suffix",
            suffix,
        ];
        run_client(&python, url, "one_call", &args)
    };
    for (first, then, suffix) in [("legacy", "auto", "eras-1"), ("auto", "legacy", "eras-2")] {
        let kept = as_alice(first, suffix);
        let replayed = as_alice(then, suffix);
        assert_ne!(
            kept["protocol_version"], replayed["protocol_version"],
            "{replayed}"
        );
        let kept_text = text(&kept["texts"][0]);
        assert!(kept_text.starts_with("Sent e-mail #"), "{kept}");
        let (notice, result) = text(&replayed["texts"][0])
            .split_once('\n')
            .expect("a notice, then the result");
        assert!(
            notice.starts_with("This exact call already ran"),
            "{replayed}"
        );
        assert_eq!(result, kept_text, "{replayed}");
        assert_eq!(replayed["is_error"], false, "{replayed}");
    }
    let stats =
        run_client(&python, url, "one_call", &["--header", "x-user=alice"])["stats"].clone();
    assert_eq!(stats["send_email"], 3, "two kept, one more now: {stats}");
}

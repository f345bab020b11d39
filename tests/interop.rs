//! The MCP mode against clients we did not write: the official Python MCP SDK's `Client`
//! (at its defaults it speaks protocol 2026-07-28 to this server; `mode="legacy"` forces the
//! handshake era) and the official TypeScript SDK's client (at its defaults the handshake era;
//! `auto` speaks 2026-07-28), driving the `mcp_server` example (rmcp) with their own request
//! timeouts, so that the cancellations are the ones the SDKs make by themselves: a closed
//! stream in 2026-07-28, `notifications/cancelled` before. See `support/sdk_clients.rs` for
//! where the SDKs are installed.
#![cfg(feature = "mcp")]

mod support;

use serde_json::Value;
use support::gateway::start_example;
use support::sdk_clients::{self, Sdk, Speaking, ALICE, BOB, HANDSHAKE, STATELESS};

fn python() -> Option<Sdk> {
    sdk_clients::python()
}

/// Runs one scenario of the Python client (`args` added to its command line) against a fresh
/// `mcp_server` with a 500 ms deadline (and `env`), and returns what it reported.
fn scenario_with(sdk: &Sdk, name: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut env = env.to_vec();
    env.push(("DEADLINE_MS", "500"));
    let server = start_example("mcp_server", &env);
    sdk_clients::run(sdk, &server.client.base, name, args)
}

/// A scenario of the Python client, spoken as `how` says.
fn spoken(python: &Sdk, name: &str, how: Speaking) -> Value {
    how.spoke(scenario_with(python, name, how.args, &[]))
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
    sent_once_despite_timeouts(&spoken(&python, "timeout_retry", STATELESS));
}

#[test]
fn a_handshake_era_sdk_client_that_cancels_on_timeout_retries_and_it_runs_once() {
    let Some(python) = python() else { return };
    sent_once_despite_timeouts(&spoken(&python, "timeout_retry", HANDSHAKE));
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
    replayed_with_notice(&spoken(&python, "fresh_id_replay", STATELESS));
}

#[test]
fn a_handshake_era_sdk_client_retrying_with_a_fresh_id_gets_the_replay() {
    let Some(python) = python() else { return };
    replayed_with_notice(&spoken(&python, "fresh_id_replay", HANDSHAKE));
}

/// Checks a `slow_in_progress` report: "in progress" first, as a result the SDK accepted
/// (not an exception), then the one real report.
fn in_progress_then_the_report(report: &Value) {
    let texts = report["texts"].as_array().unwrap();
    assert!(
        text(&texts[0]).starts_with("This call started the action"),
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
    in_progress_then_the_report(&spoken(&python, "slow_in_progress", STATELESS));
}

#[test]
fn a_handshake_era_sdk_client_calling_a_slow_tool_is_told_in_progress_then_gets_the_result() {
    let Some(python) = python() else { return };
    in_progress_then_the_report(&spoken(&python, "slow_in_progress", HANDSHAKE));
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
        sdk_clients::run(&python, url, "one_call", &args)
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
        sdk_clients::run(&python, url, "one_call", &["--header", "x-user=alice"])["stats"].clone();
    assert_eq!(stats["send_email"], 3, "two kept, one more now: {stats}");
}

#[test]
fn the_typescript_sdk_client_at_its_defaults_retries_a_timed_out_call_and_it_runs_once() {
    let Some(ts) = sdk_clients::typescript() else {
        return;
    };
    let report = scenario_with(&ts, "timeout_retry", &[], &[]);
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    sent_once_despite_timeouts(&report);
    replayed_with_notice(&scenario_with(&ts, "fresh_id_replay", &[], &[]));
}

#[test]
fn the_typescript_sdk_client_in_2026_07_28_gets_one_execution_replays_and_in_progress() {
    let Some(ts) = sdk_clients::typescript() else {
        return;
    };
    let args = ["--mode", "auto", "--header", ALICE];
    for (name, check) in [
        ("timeout_retry", sent_once_despite_timeouts as fn(&Value)),
        ("fresh_id_replay", replayed_with_notice),
        ("slow_in_progress", in_progress_then_the_report),
    ] {
        let report = scenario_with(&ts, name, &args, &[]);
        assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
        check(&report);
    }
}

//! MCP mode in front of a server that is not Rust: an MCP server built with the official
//! Python SDK (`MCPServer`, which serves both protocol eras on one endpoint), behind
//! `idempotency-proxy --mcp /mcp`, driven by the official SDK clients (the Python `Client` at
//! its defaults, 2026-07-28, and forced to the handshake era; the TypeScript client in both),
//! whose own request timeouts make the cancellations. See the crate's
//! `tests/support/sdk_clients.rs` for where the SDKs are installed.

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::sdk_clients::{self, Sdk, Speaking, ALICE, BOB, HANDSHAKE, STATELESS};
use support::{Proxy, Upstream};

const SDK_CHECK: &str =
    "import importlib.metadata as m, mcp.server.mcpserver; assert m.version('mcp') == '2.3.0'";

/// The interpreter with the SDK (its server), or `None` where it is missing outside CI.
fn sdk() -> Option<PathBuf> {
    support::python_with(SDK_CHECK, "the official Python MCP SDK (mcp 2.3.0)")
}

/// The Python SDK's client, where the SDK is installed.
fn python_client() -> Option<Sdk> {
    sdk_clients::python()
}

/// The Python SDK server, and a proxy in front of it serving `/mcp` in MCP mode with
/// `extra` flags.
fn behind_proxy(extra: &[&str]) -> (Upstream, Proxy) {
    let upstream = Upstream::start("mcp_server.py", &[]);
    let url = upstream.url();
    let mut args = vec!["--mcp", "/mcp"];
    args.extend_from_slice(extra);
    let proxy = Proxy::in_front_of(&url, &args);
    (upstream, proxy)
}

/// Waits until the server's counts (its `GET /stats` at `upstream`) show `what`, as `shown`
/// says.
async fn until_the_server(upstream: &str, what: &str, shown: impl Fn(&Value) -> bool) {
    let limit = std::time::Duration::from_secs(10);
    support::process::eventually(what, limit, || async {
        shown(&support::stats(upstream).await).then_some(())
    })
    .await;
}

/// The Python SDK server behind a proxy with a 500 ms deadline (and `flags`), and one
/// scenario of the SDK client (with `args`) against the proxy; what the client reported.
fn scenario_with(client: &Sdk, name: &str, args: &[&str], flags: &[&str]) -> Value {
    let mut proxy_flags = vec!["--deadline", "500ms"];
    proxy_flags.extend_from_slice(flags);
    let (_upstream, proxy) = behind_proxy(&proxy_flags);
    sdk_clients::run(client, &format!("{}/mcp", proxy.url), name, args)
}

/// A scenario of the Python client, spoken as `how` says.
fn spoken(python: &Sdk, name: &str, how: Speaking) -> Value {
    how.spoke(scenario_with(python, name, how.args, &[]))
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// Checks a `timeout_retry` report: the SDK gave up at least once, and the retry reached the
/// result of one execution that no cancellation reached.
fn sent_once_despite_timeouts(report: &Value) {
    assert!(
        text(&report["final_text"]).contains("sent to timeout-"),
        "{report}"
    );
    assert!(report["attempts"].as_u64().unwrap() >= 2, "{report}");
    assert_eq!(report["stats"]["send_email"], 1, "{report}");
    // The SDK's cancellations (a closed stream, or `notifications/cancelled`) stayed with the
    // proxy: none reached the running tool.
    assert_eq!(report["stats"]["cancelled"], 0, "{report}");
}

#[test]
fn an_sdk_client_whose_timeout_is_shorter_than_the_tool_retries_until_answered_and_it_runs_once() {
    let Some(python) = python_client() else {
        return;
    };
    sent_once_despite_timeouts(&spoken(&python, "timeout_retry", STATELESS));
}

#[test]
fn a_handshake_era_sdk_client_that_cancels_on_timeout_retries_and_it_runs_once() {
    let Some(python) = python_client() else {
        return;
    };
    sent_once_despite_timeouts(&spoken(&python, "timeout_retry", HANDSHAKE));
}

/// Checks a `fresh_id_replay` report: the second call was told it is a replay of the first.
fn replayed_with_notice(report: &Value) {
    let texts = report["texts"].as_array().unwrap();
    assert!(text(&texts[0]).starts_with("sent to replay-"), "{report}");
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
    let Some(python) = python_client() else {
        return;
    };
    replayed_with_notice(&spoken(&python, "fresh_id_replay", STATELESS));
}

#[test]
fn a_handshake_era_sdk_client_retrying_with_a_fresh_id_gets_the_replay() {
    let Some(python) = python_client() else {
        return;
    };
    replayed_with_notice(&spoken(&python, "fresh_id_replay", HANDSHAKE));
}

#[test]
fn callers_named_by_a_principal_header_get_their_replays_whatever_their_token() {
    let Some(python) = python_client() else {
        return;
    };
    let args = ["--header", "x-user=alice", "--header", ALICE];
    let report = scenario_with(
        &python,
        "fresh_id_replay",
        &args,
        &["--principal-header", "x-user"],
    );
    replayed_with_notice(&report);
    let args = ["--header", "x-user=alice", "--other-header", "x-user=bob"];
    let report = scenario_with(
        &python,
        "two_callers",
        &args,
        &["--principal-header", "x-user"],
    );
    assert_eq!(
        report["stats"]["send_email"], 2,
        "one run per principal: {report}"
    );
}

/// Checks a `slow_in_progress` report: "in progress" first, as a result the SDK accepted,
/// then the one real report.
fn in_progress_then_the_report(report: &Value) {
    let texts = report["texts"].as_array().unwrap();
    assert!(
        text(&texts[0]).starts_with("This call started the action"),
        "{report}"
    );
    // The SDK server declares an output schema for the tool (its return type), which a
    // result that is not an error would have to match: "in progress" comes as an error
    // result, which the SDK client accepts.
    assert_eq!(report["first_is_error"], true, "{report}");
    assert_eq!(
        report["first_structured_content"]["outcome"], "in_progress",
        "{report}"
    );
    assert!(
        text(texts.last().unwrap()).contains("report on churn-"),
        "{report}"
    );
    assert_eq!(report["stats"]["generate_report"], 1, "{report}");
}

#[test]
fn an_sdk_client_calling_a_slow_tool_is_told_in_progress_then_gets_the_result() {
    let Some(python) = python_client() else {
        return;
    };
    in_progress_then_the_report(&spoken(&python, "slow_in_progress", STATELESS));
}

#[test]
fn a_handshake_era_sdk_client_calling_a_slow_tool_is_told_in_progress_then_gets_the_result() {
    let Some(python) = python_client() else {
        return;
    };
    in_progress_then_the_report(&spoken(&python, "slow_in_progress", HANDSHAKE));
}

#[test]
fn two_users_with_their_own_tokens_each_run_a_call_once_and_never_share_its_result() {
    let Some(python) = python_client() else {
        return;
    };
    let args = ["--header", ALICE, "--other-header", BOB];
    let report = scenario_with(&python, "two_callers", &args, &[]);
    let texts = report["texts"].as_array().unwrap();
    assert!(text(&texts[0]).starts_with("sent to callers-"), "{report}");
    assert!(!text(&texts[1]).starts_with("This exact call"), "{report}");
    assert_ne!(texts[0], texts[1], "{report}");
    assert!(
        text(&texts[2]).starts_with("This exact call already ran"),
        "{report}"
    );
    assert_eq!(report["stats"]["send_email"], 2, "{report}");
}

#[test]
fn two_sdk_sessions_never_share_an_intent() {
    let Some(python) = python_client() else {
        return;
    };
    let report = spoken(&python, "two_callers", HANDSHAKE);
    let texts = report["texts"].as_array().unwrap();
    assert_ne!(texts[0], texts[1], "{report}");
    assert!(
        text(&texts[2]).starts_with("This exact call already ran"),
        "{report}"
    );
    assert_eq!(report["stats"]["send_email"], 2, "{report}");
}

#[test]
fn the_quick_starts_shared_scope_protects_a_client_left_at_its_defaults() {
    let Some(python) = python_client() else {
        return;
    };
    let report = scenario_with(&python, "fresh_id_replay", &[], &["--mcp-shared-scope"]);
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    replayed_with_notice(&report);
}

/// One JSON-RPC message to the proxy's `/mcp` in `session`; the session id it answered
/// with and the JSON-RPC answer (read from an event stream where it came as one).
async fn rpc(proxy: &str, session: Option<&str>, message: &str) -> (Option<String>, Value) {
    let mut request = support::client()
        .post(format!("{proxy}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(message.to_owned());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let answer = support::answer(request).await;
    let session = answer.header("mcp-session-id").map(str::to_owned);
    let data = answer
        .text()
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(answer.text())
        .to_owned();
    (session, serde_json::from_str(&data).unwrap_or(Value::Null))
}

/// A session opened by hand through the proxy: its id.
async fn raw_session(proxy: &str) -> String {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (session, _) = rpc(proxy, None, init).await;
    let session = session.expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    rpc(proxy, Some(&session), initialized).await;
    session
}

#[tokio::test]
async fn a_call_run_as_a_task_is_answered_at_once_and_its_result_read_from_the_proxy() {
    if sdk().is_none() {
        return;
    }
    let (upstream, proxy) = behind_proxy(&[]);
    let url = upstream.url();
    let session = raw_session(&proxy.url).await;
    let as_task = r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"generate_report","arguments":{"topic":"q3","seconds":0.8},"task":{"ttl":60000}}}"#;
    let (_, created) = rpc(&proxy.url, Some(&session), as_task).await;
    assert_eq!(created["id"], 20, "{created}");
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    let query = |id: u32, method: &str| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"taskId": task_id}})
            .to_string()
    };
    let (_, got) = rpc(&proxy.url, Some(&session), &query(21, "tasks/get")).await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    let (_, result) = rpc(&proxy.url, Some(&session), &query(22, "tasks/result")).await;
    assert_eq!(result["id"], 22, "{result}");
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("report on q3"), "{result}");
    let (_, got) = rpc(&proxy.url, Some(&session), &query(23, "tasks/get")).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    // The same call again, plain: the same intent, never run twice.
    let plain = as_task.replace(r#","task":{"ttl":60000}"#, "");
    let (_, replayed) = rpc(&proxy.url, Some(&session), &plain).await;
    let texts = replayed["result"]["content"].to_string();
    assert!(texts.contains("report on q3 (report_1)"), "{replayed}");
    let counts = support::stats(&url).await;
    assert_eq!(counts["generate_report"], 1, "{counts}");
}

#[tokio::test]
async fn a_server_that_dies_during_a_call_leaves_it_kept_as_may_have_run() {
    if sdk().is_none() {
        return;
    }
    let (mut upstream, proxy) = behind_proxy(&[]);
    let session = raw_session(&proxy.url).await;
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"send_email","arguments":{{"to":"ada@example.com","subject":"s","body":"b","delay_ms":1500}}}}}}"#
        )
    };
    let first = {
        let (proxy, session, call) = (proxy.url.clone(), session.clone(), call(1));
        tokio::spawn(async move { rpc(&proxy, Some(&session), &call).await.1 })
    };
    until_the_server(&upstream.url(), "the call running", |stats| {
        stats["started"]["send_email"] == 1
    })
    .await;
    upstream.kill();
    let first = first.await.unwrap();
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["result"]["isError"], true, "{first}");
    assert_eq!(
        first["result"]["structuredContent"]["outcome"], "unknown",
        "{first}"
    );
    let text = first["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("This action may have run"), "{first}");
    // Not released: the retry is told, not sent to a server that is gone (which would say
    // "not executed").
    let (_, retry) = rpc(&proxy.url, Some(&session), &call(2)).await;
    assert_eq!(retry["id"], 2, "{retry}");
    let result = &retry["result"];
    assert_eq!(result["structuredContent"]["outcome"], "unknown", "{retry}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("This action may have run"), "{retry}");
}

#[tokio::test]
async fn a_tool_the_server_lists_as_read_only_passes_through_and_runs_each_time() {
    if sdk().is_none() {
        return;
    }
    let (upstream, proxy) = behind_proxy(&[]);
    let session = raw_session(&proxy.url).await;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let (_, listed) = rpc(&proxy.url, Some(&session), list).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let search = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"search","arguments":{{"query":"q3"}}}}}}"#
        )
    };
    for id in [2, 3] {
        let (_, found) = rpc(&proxy.url, Some(&session), &search(id)).await;
        assert_eq!(found["id"], id, "{found}");
        let text = found["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(text, "results for q3", "not a replay: {found}");
    }
    assert_eq!(support::stats(&upstream.url()).await["search"], 2);
}

/// A `send_email` call of `id`, through the proxy at `proxy` in `session`: its first text.
async fn email(proxy: &str, session: &str, id: u32) -> String {
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"send_email","arguments":{{"to":"a@example.com","subject":"s","body":"b"}}}}}}"#
    );
    let (_, answer) = rpc(proxy, Some(session), &call).await;
    let content = answer["result"]["content"].as_array().cloned();
    let last = content.and_then(|c| c.last().cloned()).unwrap_or_default();
    last["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_tool_the_proxy_is_told_to_pass_runs_each_time_by_flag_or_by_file() {
    if sdk().is_none() {
        return;
    }
    let (upstream, proxy) = behind_proxy(&["--pass-tool", "send_email"]);
    let session = raw_session(&proxy.url).await;
    assert_ne!(
        email(&proxy.url, &session, 1).await,
        email(&proxy.url, &session, 2).await
    );
    assert_eq!(support::stats(&upstream.url()).await["send_email"], 2);

    let file = "[[tools]]\nname = \"send_email\"\nmode = \"pass\"\n\n\
                [[tools]]\nname = \"generate_report\"\ndeadline = \"0s\"\n";
    let (proxy, _file) = support::proxy_with_config(
        &upstream.url(),
        &format!("{file}\n[[routes]]\nprefix = \"/mcp\"\nmode = \"mcp\"\n"),
    );
    let session = raw_session(&proxy.url).await;
    email(&proxy.url, &session, 3).await;
    email(&proxy.url, &session, 4).await;
    assert_eq!(support::stats(&upstream.url()).await["send_email"], 4);
    // A tool of its own deadline: zero answers "in progress" at once.
    let report = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"generate_report","arguments":{"topic":"q4","seconds":0.5}}}"#;
    let (_, told) = rpc(&proxy.url, Some(&session), report).await;
    let said = told["result"]["content"].to_string();
    assert!(said.contains("still running"), "{told}");
}

#[tokio::test]
async fn an_mcp_call_without_a_session_is_forwarded_unprotected_where_missing_scopes_pass() {
    let upstream = Upstream::tools(0);
    let config =
        "[scope]\nmissing = \"pass\"\n\n[[routes]]\nprefix = \"/tools/mcp\"\nmode = \"mcp\"\n";
    let (proxy, _config) = support::proxy_with_config(&upstream.url(), config);
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"ada@example.com"}}}"#;
    for _ in 0..2 {
        let answer = support::answer(
            support::client()
                .post(format!("{}/tools/mcp", proxy.url))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(call),
        )
        .await;
        assert!(
            !answer.text().contains("not executed"),
            "refused by the layer: {answer:?}"
        );
    }
    // Each call reached the server, unprotected, as the HTTP routes' do.
    assert_eq!(support::stats(&upstream.url()).await["mcp"], 2);
}

#[tokio::test]
async fn a_stream_the_server_closes_after_a_priming_event_is_resumed_and_the_call_runs_once() {
    if sdk().is_none() {
        return;
    }
    let (upstream, proxy) = behind_proxy(&[]);
    let session = raw_session(&proxy.url).await;
    // The server primes the call's stream, closes it at once and sends the answer 800 ms
    // later, for the client to resume with GET and Last-Event-ID: the proxy does that itself.
    let call = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"polled_send","arguments":{{"to":"ada@example.com","delay_ms":800}}}}}}"#
        )
    };
    let duplicate = {
        let (proxy, session, call) = (proxy.url.clone(), session.clone(), call(2));
        let upstream = upstream.url();
        tokio::spawn(async move {
            // Sent while the call runs with its stream closed.
            until_the_server(&upstream, "the call's stream closed", |stats| {
                stats["closed_streams"] == 1
            })
            .await;
            rpc(&proxy, Some(&session), &call).await.1
        })
    };
    let (_, first) = rpc(&proxy.url, Some(&session), &call(1)).await;
    assert_eq!(first["id"], 1, "{first}");
    let text = |answer: &Value| answer["result"]["content"].to_string();
    assert!(
        text(&first).contains("sent to ada@example.com (polled_1)"),
        "{first}"
    );
    let duplicate = duplicate.await.unwrap();
    assert_eq!(duplicate["id"], 2, "{duplicate}");
    assert!(
        text(&duplicate).contains("(polled_1)"),
        "coalesced: {duplicate}"
    );
    let (_, again) = rpc(&proxy.url, Some(&session), &call(3)).await;
    assert!(
        text(&again).contains("This exact call already ran"),
        "{again}"
    );
    assert!(text(&again).contains("(polled_1)"), "{again}");
    assert_eq!(support::stats(&upstream.url()).await["polled_send"], 1);
}

/// One 2026-07-28 `tools/call` to the proxy's `/mcp` as `token`, with `extra` headers; the
/// HTTP status and the JSON-RPC answer.
async fn stateless_call(
    proxy: &str,
    token: &str,
    call: &Value,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = support::client()
        .post(format!("{proxy}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", call["params"]["name"].as_str().unwrap())
        .header("authorization", format!("Bearer {token}"));
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let answer = support::answer(request.body(call.to_string())).await;
    (
        answer.status.as_u16(),
        serde_json::from_slice(&answer.body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_header_mismatch_the_server_finds_is_released_so_the_corrected_call_runs_once() {
    if sdk().is_none() {
        return;
    }
    let (upstream, proxy) = behind_proxy(&[]);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "regional_send", "arguments": {"to": "ada@example.com", "region": "eu"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    // The tool's schema asks for the region in a header too, which the server checks:
    // refused with -32020, nothing run, and the key released.
    let (status, refused) = stateless_call(&proxy.url, "t", &call, &[]).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32020, "{refused}");
    // The client's own recovery: the same call, with the header.
    let region = [("mcp-param-region", "eu")];
    let (status, ran) = stateless_call(&proxy.url, "t", &call, &region).await;
    assert_eq!(status, 200, "{ran}");
    assert_eq!(ran["result"]["resultType"], "complete", "{ran}");
    let (_, replayed) = stateless_call(&proxy.url, "t", &call, &region).await;
    let text = replayed["result"]["content"].to_string();
    assert!(text.contains("This exact call already ran"), "{replayed}");
    assert!(text.contains("(regional_1)"), "{replayed}");
    // The same arguments with a header the server would refuse: refused as the server
    // refuses it, never answered with the kept result.
    for wrong in ["us", "=?base64?ZXU?=", "=?base64?ZX!U?="] {
        let header = [("mcp-param-region", wrong)];
        let (status, refused) = stateless_call(&proxy.url, "t", &call, &header).await;
        assert_eq!(status, 400, "{wrong}: {refused}");
        assert_eq!(refused["error"]["code"], -32020, "{wrong}: {refused}");
    }
    let (status, refused) = stateless_call(&proxy.url, "t", &call, &[]).await;
    assert_eq!(status, 400, "no header: {refused}");
    assert_eq!(refused["error"]["code"], -32020, "no header: {refused}");
    let encoded = [("mcp-param-region", "=?base64?ZXU=?=")];
    let (_, replayed) = stateless_call(&proxy.url, "t", &call, &encoded).await;
    let text = replayed["result"]["content"].to_string();
    assert!(text.contains("(regional_1)"), "{replayed}");
    assert_eq!(support::stats(&upstream.url()).await["regional_send"], 1);
}

#[test]
fn the_typescript_sdk_client_in_either_era_gets_one_execution_and_its_replays() {
    let Some(ts) = sdk_clients::typescript() else {
        return;
    };
    if sdk().is_none() {
        return;
    }
    for (args, version) in [
        (&["--header", ALICE][..], "2025-11-25"),
        (&["--mode", "auto", "--header", ALICE][..], "2026-07-28"),
    ] {
        for (name, check) in [
            ("timeout_retry", sent_once_despite_timeouts as fn(&Value)),
            ("fresh_id_replay", replayed_with_notice),
            ("slow_in_progress", in_progress_then_the_report),
        ] {
            let report = scenario_with(&ts, name, args, &[]);
            assert_eq!(report["protocol_version"], version, "{name}: {report}");
            check(&report);
        }
    }
}

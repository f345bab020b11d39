//! The MCP mode in protocol 2026-07-28, by hand against the `mcp_server` example (rmcp, which
//! serves both eras on one endpoint): versions and routing headers checked as the server
//! checks them, `_meta` in the key, and the tasks extension, driven by a client written for
//! these tests (no SDK client speaks the extension yet).
#![cfg(feature = "mcp")]

mod support;

use std::time::Duration;

use rmcp::model::{CreateTaskResult, GetTaskResult, TaskAckResult};
use serde_json::{json, Value};
use support::gateway::{start_example, Gateway};
use support::process::eventually;

const VERSION: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The example with `env`, and its MCP endpoint.
struct Server {
    process: Gateway,
}

impl Server {
    fn start(env: &[(&str, &str)]) -> Self {
        let mut env = env.to_vec();
        env.push(("DEADLINE_MS", "300"));
        Self {
            process: start_example("mcp_server", &env),
        }
    }

    async fn stats(&self) -> Value {
        let root = self.process.client.base.trim_end_matches("/mcp");
        let response = self.process.client.http.get(format!("{root}/stats")).send();
        response.await.unwrap().json().await.unwrap()
    }

    /// One POST of `message` with the routing headers a 2026-07-28 client sends for it, as
    /// `token`, with `headers` replacing or adding to them; the HTTP status and the answer.
    async fn post(&self, token: &str, message: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let method = message["method"].as_str().unwrap_or_default();
        let name = message["params"]["name"]
            .as_str()
            .or(message["params"]["taskId"].as_str());
        let mut sent = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", VERSION),
            ("mcp-method", method),
        ];
        if let Some(name) = name {
            sent.push(("mcp-name", name));
        }
        let auth = format!("Bearer {token}");
        sent.push(("authorization", &auth));
        sent.retain(|(name, _)| !headers.iter().any(|(other, _)| other == name));
        sent.extend_from_slice(headers);
        let mut request = self.process.client.http.post(&self.process.client.base);
        for (name, value) in sent {
            request = request.header(name, value);
        }
        let response = request.body(message.to_string()).send().await.unwrap();
        support::json_rpc_answer(response).await
    }
}

/// The `_meta` a 2026-07-28 client puts on every request, with `capabilities`.
fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "hand", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

fn tool_call(id: u32, tool: &str, arguments: Value, meta: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments, "_meta": meta}})
}

fn email(to: &str) -> Value {
    json!({"to": to, "subject": "Hi", "body": "Hello"})
}

fn first_text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_protocol_version_the_layer_does_not_know_is_refused_as_a_server_would_and_nothing_runs()
{
    let server = Server::start(&[]);
    let call = tool_call(1, "send_email", email("ada@example.com"), meta(json!({})));
    let (status, answer) = server
        .post("t", &call, &[("mcp-protocol-version", "2099-01-01")])
        .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32022, "{answer}");
    assert_eq!(answer["error"]["data"]["requested"], "2099-01-01");
    let supported = answer["error"]["data"]["supported"].to_string();
    assert!(
        supported.contains(VERSION) && supported.contains("2025-11-25"),
        "{answer}"
    );
    assert_eq!(server.stats().await["send_email"], 0);
}

#[tokio::test]
async fn a_routing_header_that_does_not_match_the_body_is_refused_and_nothing_runs() {
    let server = Server::start(&[]);
    let call = tool_call(1, "send_email", email("ada@example.com"), meta(json!({})));
    for header in [("mcp-name", "search"), ("mcp-method", "tools/list")] {
        let (status, answer) = server.post("t", &call, &[header]).await;
        assert_eq!(status, 400, "{header:?}: {answer}");
        assert_eq!(answer["error"]["code"], -32020, "{header:?}: {answer}");
    }
    // The version in `_meta` must be the header's too.
    let mut other = meta(json!({}));
    other["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let call = tool_call(2, "send_email", email("ada@example.com"), other);
    let (status, answer) = server.post("t", &call, &[]).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (400, &json!(-32020)),
        "{answer}"
    );
    assert_eq!(server.stats().await["send_email"], 0);
}

#[tokio::test]
async fn every_answer_to_a_stateless_call_carries_a_result_type_replays_included() {
    let server = Server::start(&[]);
    let call = tool_call(1, "send_email", email("ada@example.com"), meta(json!({})));
    let (_, first) = server.post("t", &call, &[]).await;
    let (_, replay) = server.post("t", &call, &[]).await;
    for answer in [&first, &replay] {
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    }
    assert!(
        first_text(&replay).starts_with("This exact call already ran"),
        "{replay}"
    );
    // Refused: nothing names the caller. Still a result the client reads.
    let anonymous = tool_call(2, "send_email", email("bob@example.com"), meta(json!({})));
    let (status, refused) = server.post("", &anonymous, &[("authorization", "")]).await;
    assert_eq!(status, 200, "{refused}");
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        first_text(&refused).starts_with("This call was not run"),
        "{refused}"
    );
    assert_eq!(server.stats().await["send_email"], 1);
}

#[tokio::test]
async fn two_tokens_sending_one_session_id_never_share_a_result() {
    let server = Server::start(&[]);
    // 2026-07-28 has no session: a `Mcp-Session-Id` sent anyway names nothing.
    let session = [("mcp-session-id", "same")];
    let call = tool_call(
        1,
        "send_email",
        email("shared@example.com"),
        meta(json!({})),
    );
    let (_, alice) = server.post("alice", &call, &session).await;
    let (_, bob) = server.post("bob", &call, &session).await;
    assert!(first_text(&alice).starts_with("Sent e-mail #1"), "{alice}");
    assert!(first_text(&bob).starts_with("Sent e-mail #2"), "{bob}");
    assert_eq!(server.stats().await["send_email"], 2);
}

#[tokio::test]
async fn meta_members_a_tool_may_read_are_part_of_the_intent_and_per_attempt_ones_are_not() {
    let server = Server::start(&[]);
    let args = email("meta@example.com");
    let mut tenant_a = meta(json!({}));
    tenant_a["tenant"] = json!("a");
    let mut tenant_b = meta(json!({}));
    tenant_b["tenant"] = json!("b");
    server
        .post(
            "t",
            &tool_call(1, "send_email", args.clone(), tenant_a.clone()),
            &[],
        )
        .await;
    server
        .post(
            "t",
            &tool_call(2, "send_email", args.clone(), tenant_b),
            &[],
        )
        .await;
    assert_eq!(
        server.stats().await["send_email"],
        2,
        "two tenants, two intents"
    );
    // Another attempt of tenant a's call: a new progress token, trace and client version.
    let mut again = tenant_a;
    again["progressToken"] = json!(99);
    again["traceparent"] = json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    again["io.modelcontextprotocol/clientInfo"] = json!({"name": "hand", "version": "2"});
    let (_, replay) = server
        .post("t", &tool_call(3, "send_email", args, again), &[])
        .await;
    assert!(
        first_text(&replay).starts_with("This exact call already ran"),
        "{replay}"
    );
    assert_eq!(server.stats().await["send_email"], 2);
}

#[tokio::test]
async fn a_task_past_the_deadline_is_polled_its_cancel_absorbed_and_its_result_read_once() {
    let server = Server::start(&[("MCP_TASKS", "on")]);
    let discover = json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover",
                          "params": {"_meta": meta(json!({}))}});
    let (_, discovered) = server.post("t", &discover, &[]).await;
    assert!(
        discovered["result"]["capabilities"]["extensions"][TASKS].is_object(),
        "{discovered}"
    );
    let takes_tasks = meta(json!({"extensions": {TASKS: {}}}));
    let report = json!({"topic": "q3", "seconds": 1.2});
    let (_, created) = server
        .post(
            "t",
            &tool_call(1, "generate_report", report.clone(), takes_tasks.clone()),
            &[],
        )
        .await;
    let task = &created["result"];
    // The shapes are rmcp's model of the extension, which the reference server speaks.
    let typed: CreateTaskResult = serde_json::from_value(task.clone()).expect("a task");
    assert_eq!(typed.task.task_id, task["taskId"].as_str().unwrap());
    assert_eq!(task["resultType"], "task", "{created}");
    assert_eq!(task["status"], "working", "{created}");
    assert!(
        task["ttlMs"].is_u64() && task["pollIntervalMs"].is_u64(),
        "{created}"
    );
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    let ask = |id: u32, method: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": method,
               "params": {"taskId": task_id, "_meta": takes_tasks.clone()}})
    };
    let (_, cancelled) = server.post("t", &ask(2, "tasks/cancel"), &[]).await;
    let _: TaskAckResult = serde_json::from_value(cancelled["result"].clone()).expect("an ack");
    assert_eq!(
        cancelled["result"],
        json!({"resultType": "complete"}),
        "{cancelled}"
    );
    // Another caller cannot see the task: the layer leaves it to the server, which does
    // not know it.
    let (_, foreign) = server.post("other", &ask(3, "tasks/get"), &[]).await;
    assert!(
        foreign["error"].is_object() && foreign["result"].is_null(),
        "{foreign}"
    );
    let mut attempt = 10;
    let done = eventually("the task completed", Duration::from_secs(4), || {
        attempt += 1;
        let asked = ask(attempt, "tasks/get");
        let server = &server;
        async move {
            let (_, got) = server.post("t", &asked, &[]).await;
            let _: GetTaskResult = serde_json::from_value(got["result"].clone()).expect("a task");
            assert_eq!(got["result"]["resultType"], "complete", "{got}");
            if got["result"]["status"] == "completed" {
                return Some(got);
            }
            assert_eq!(got["result"]["status"], "working", "{got}");
            None
        }
    })
    .await;
    let result = &done["result"]["result"];
    assert_eq!(result["resultType"], "complete", "{done}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Report #1"),
        "{done}"
    );
    // A client that takes no task is told "in progress" in words, then given the result.
    let plain = tool_call(50, "generate_report", report, meta(json!({})));
    let (_, replay) = server.post("t", &plain, &[]).await;
    assert!(
        first_text(&replay).starts_with("This exact call already ran"),
        "{replay}"
    );
    let stats = server.stats().await;
    assert_eq!(stats["generate_report"], 1, "{stats}");
    assert_eq!(stats["cancelled"], 0, "{stats}");
}

#[tokio::test]
async fn a_client_that_takes_no_task_is_told_in_progress_in_words() {
    let server = Server::start(&[("MCP_TASKS", "on")]);
    let report = json!({"topic": "q4", "seconds": 1.0});
    let (_, answer) = server
        .post(
            "t",
            &tool_call(1, "generate_report", report, meta(json!({}))),
            &[],
        )
        .await;
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert!(
        first_text(&answer).starts_with("This call started the action"),
        "{answer}"
    );
}

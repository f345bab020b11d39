//! The MCP mode against the `mcp_server` example, driven by the `rmcp` client over Streamable
//! HTTP as an agent would drive it; malformed envelopes by hand.
#![cfg(feature = "mcp")]

mod support;

use std::time::Duration;

use futures_util::future::join_all;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Map, Value};
use support::gateway::{start_example, Gateway};
use support::process::eventually;

type McpClient = RunningService<RoleClient, ClientConfig>;

/// The example, and its MCP endpoint's URL.
struct Server {
    process: Gateway,
    endpoint: String,
}

fn start(env: &[(&str, &str)]) -> Server {
    let process = start_example("mcp_server", env);
    let endpoint = process.client.base.clone();
    Server { process, endpoint }
}

impl Server {
    /// A new MCP session.
    async fn connect(&self) -> McpClient {
        let transport = StreamableHttpClientTransport::from_uri(self.endpoint.as_str());
        ClientConfig::default()
            .serve(transport)
            .await
            .expect("the MCP handshake")
    }

    /// Executions per tool, from `GET /stats`.
    async fn stats(&self) -> Value {
        let root = self.endpoint.trim_end_matches("/mcp");
        let response = self.process.client.http.get(format!("{root}/stats")).send();
        response.await.unwrap().json().await.unwrap()
    }

    /// Returns once `tool` has started running in the server.
    async fn started(&self, tool: &str) {
        eventually(
            &format!("{tool} starting"),
            Duration::from_secs(10),
            || async { (self.stats().await[tool].as_u64() >= Some(1)).then_some(()) },
        )
        .await;
    }

    /// One hand-written JSON-RPC POST in `session` (none if empty), accepting `accept`.
    async fn post(&self, session: &str, accept: &str, body: &str) -> (u16, String, String) {
        let mut request = self.process.client.http.post(&self.endpoint);
        if !session.is_empty() {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let response = request
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map_or("", |v| v.to_str().unwrap())
            .to_owned();
        (status, content_type, response.text().await.unwrap())
    }
}

fn arguments(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

fn call(tool: &'static str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool).with_arguments(arguments(args))
}

/// The text of a result's last content block: the tool's own, after a replay's notice.
fn text(result: &CallToolResult) -> &str {
    let last = result.content.last().expect("content");
    &last.as_text().expect("a text result").text
}

/// The same, read from a JSON-RPC answer.
fn last_text(message: &Value) -> &Value {
    let content = message["result"]["content"].as_array();
    content
        .and_then(|c| c.last())
        .map_or(&Value::Null, |block| &block["text"])
}

/// Calls a tool, failing the test rather than hanging if the answer never matches the call.
async fn call_tool(client: &McpClient, params: CallToolRequestParams) -> CallToolResult {
    tokio::time::timeout(Duration::from_secs(10), client.call_tool(params))
        .await
        .expect("an answer carrying the call's own id")
        .expect("a tool result")
}

/// The session id of a client, read from its peer: the hand-written requests join it.
async fn raw_session(server: &Server) -> String {
    let accept = "application/json, text/event-stream";
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let response = server
        .process
        .client
        .http
        .post(&server.endpoint)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(init)
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    response.text().await.unwrap();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, _, _) = server.post(&session, accept, initialized).await;
    assert_eq!(status, 202, "a notification passes through to the server");
    session
}

#[tokio::test]
async fn a_retried_call_with_a_new_id_sends_one_email_and_answers_with_its_own_id() {
    let server = start(&[]);
    let client = server.connect().await;
    let email = json!({"to": "a@example.com", "subject": "hi", "body": "hello"});
    let first = call_tool(&client, call("send_email", email.clone())).await;
    // The rmcp client numbers each request anew: the retry is a new JSON-RPC id.
    let retry = call_tool(&client, call("send_email", email)).await;
    assert_eq!(text(&first), text(&retry));
    assert!(
        text(&first).starts_with("Sent e-mail #1"),
        "{}",
        text(&first)
    );
    assert_eq!(server.stats().await["send_email"], 1);

    // Spelled differently (key order, a progress token in _meta), still the same intent.
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let body = r#"{"jsonrpc":"2.0","id":"b-7","method":"tools/call","params":{"_meta":{"progressToken":3},"arguments":{"body":"hello","subject":"hi","to":"a@example.com"},"name":"send_email"}}"#;
    let (status, content_type, answer) = server.post(&session, accept, body).await;
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    assert_eq!(answer["id"], "b-7");
    assert!(last_text(&answer)
        .as_str()
        .unwrap()
        .starts_with("Sent e-mail #2"));
    let (_, _, again) = server
        .post(&session, accept, &body.replace("b-7", "b-8"))
        .await;
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["id"], "b-8");
    assert_eq!(last_text(&again), last_text(&answer));
    assert_eq!(server.stats().await["send_email"], 2, "one per session");
}

#[tokio::test]
async fn a_client_that_accepts_only_an_event_stream_gets_the_replay_as_one() {
    let server = start(&[]);
    let session = raw_session(&server).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"b@example.com","subject":"s","body":"b"}}}"#;
    let both = "application/json, text/event-stream";
    server.post(&session, both, body).await;
    let (status, content_type, stream) = server
        .post(
            &session,
            "text/event-stream",
            &body.replace("\"id\":1", "\"id\":2"),
        )
        .await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    let data = stream
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .expect("one data line");
    let message: Value = serde_json::from_str(data).unwrap();
    assert_eq!(message["id"], 2);
    assert!(last_text(&message)
        .as_str()
        .unwrap()
        .starts_with("Sent e-mail #1"));
    assert_eq!(server.stats().await["send_email"], 1);
}

#[tokio::test]
async fn parallel_identical_calls_run_once_and_all_get_its_result() {
    let server = start(&[]);
    let client = server.connect().await;
    let email = json!({"to": "c@example.com", "subject": "s", "body": "b", "delay_ms": 400});
    let calls = (0..5).map(|_| call_tool(&client, call("send_email", email.clone())));
    let results = join_all(calls).await;
    for result in &results {
        assert_eq!(text(result), text(&results[0]));
    }
    assert_eq!(server.stats().await["send_email"], 1);
}

#[tokio::test]
async fn in_progress_for_a_tool_not_listed_through_the_layer_is_an_error_result() {
    // A result that is not an error must match the tool's output schema, which the layer
    // has not seen: only an error result is valid whatever the schema.
    let server = start(&[("DEADLINE_MS", "300")]);
    let client = server.connect().await;
    let report = json!({"topic": "unlisted", "seconds": 1.0});
    let early = call_tool(&client, call("generate_report", report)).await;
    assert_eq!(early.is_error, Some(true));
    assert!(text(&early).starts_with("This call started the action"));
    let structured = early
        .structured_content
        .as_ref()
        .expect("structured content");
    assert_eq!(structured["outcome"], "in_progress");
    assert_eq!(structured["retryable"], true);
}

#[tokio::test]
async fn a_slow_tool_answers_in_progress_then_its_result() {
    let server = start(&[("DEADLINE_MS", "300")]);
    let client = server.connect().await;
    // Listed through the layer without an output schema, as hosts list tools before use.
    client.list_all_tools().await.unwrap();
    let report = json!({"topic": "sales", "seconds": 1.5});
    let early = call_tool(&client, call("generate_report", report.clone())).await;
    assert_eq!(early.is_error, Some(false));
    assert!(
        text(&early).starts_with("This call started the action"),
        "{}",
        text(&early)
    );
    assert!(text(&early).contains("must not") || text(&early).contains("Do not repeat"));
    let structured = early
        .structured_content
        .as_ref()
        .expect("structured content");
    assert_eq!(structured["outcome"], "in_progress");
    assert!(structured["retry_after_s"].as_u64().unwrap() >= 1);
    assert_eq!(structured["intent"].as_str().unwrap().len(), 64);

    let done = eventually("the report ready", Duration::from_secs(10), || async {
        let asked = call_tool(&client, call("generate_report", report.clone())).await;
        text(&asked).starts_with("Report").then_some(asked)
    })
    .await;
    assert_eq!(text(&done), "Report #1 on \"sales\" is ready.");
    assert_eq!(server.stats().await["generate_report"], 1);
}

#[tokio::test]
async fn tools_declared_read_only_are_never_stored() {
    let server = start(&[]);
    let client = server.connect().await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "search"));
    let first = call_tool(&client, call("search", json!({"q": "x"}))).await;
    let second = call_tool(&client, call("search", json!({"q": "x"}))).await;
    assert_ne!(text(&first), text(&second));
    assert_eq!(server.stats().await["search"], 2);
}

#[tokio::test]
async fn different_sessions_never_share_a_result() {
    let server = start(&[]);
    let (alice, bob) = (server.connect().await, server.connect().await);
    let email = json!({"to": "d@example.com", "subject": "s", "body": "b"});
    let a = call_tool(&alice, call("send_email", email.clone())).await;
    let b = call_tool(&bob, call("send_email", email)).await;
    assert_ne!(text(&a), text(&b));
    assert_eq!(server.stats().await["send_email"], 2);
}

#[tokio::test]
async fn malformed_envelopes_get_json_rpc_errors_and_nothing_runs() {
    let server = start(&[]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let email =
        r#"{"name":"send_email","arguments":{"to":"e@example.com","subject":"s","body":"b"}}"#;

    let no_params = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call"}"#;
    let (status, _, answer) = server.post(&session, accept, no_params).await;
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!((status, &answer["id"]), (200, &json!(5)));
    assert_eq!(answer["error"]["code"], -32602);
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Nothing was executed"));

    let batch = format!(r#"[{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{email}}}]"#);
    let (status, _, answer) = server.post(&session, accept, &batch).await;
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!((status, &answer["id"]), (400, &Value::Null));
    assert_eq!(answer["error"]["code"], -32600);

    let notification = format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{email}}}"#);
    let (status, _, answer) = server.post(&session, accept, &notification).await;
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!(-32600))
    );

    let (status, _, _) = server.post(&session, accept, "{not json").await;
    assert!(
        status >= 400,
        "the server refuses what it cannot parse: {status}"
    );
    assert_eq!(server.stats().await["send_email"], 0);
}

/// The `result` of a JSON-RPC answer, read from a JSON or a one-event SSE body.
fn result_of(body: &str) -> Value {
    let json = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .find(|data| !data.trim().is_empty())
        .unwrap_or(body);
    let message: Value = serde_json::from_str(json).unwrap();
    message["result"].clone()
}

async fn task_request(server: &Server, session: &str, id: u32, method: &str, task: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"taskId": task}});
    let accept = "application/json, text/event-stream";
    let (_, _, answer) = server.post(session, accept, &body.to_string()).await;
    let json = answer
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .find(|data| !data.trim().is_empty())
        .unwrap_or(&answer);
    serde_json::from_str(json).unwrap()
}

const REPORT_AS_TASK: &str = r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"generate_report","arguments":{"topic":"q3","seconds":0.8},"task":{"ttl":60000}}}"#;

#[tokio::test]
async fn with_tasks_on_the_server_declares_them_and_offers_them_for_protected_tools() {
    let server = start(&[("MCP_TASKS", "on")]);
    let accept = "application/json, text/event-stream";
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, _, answer) = server.post("", accept, init).await;
    assert_eq!(status, 200);
    let capabilities = &result_of(&answer)["capabilities"];
    assert_eq!(
        capabilities["tasks"]["requests"]["tools"]["call"],
        json!({})
    );
    assert_eq!(
        capabilities["tools"],
        json!({}),
        "the server's own capabilities stay"
    );

    let session = raw_session(&server).await;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let (_, _, answer) = server.post(&session, accept, list).await;
    let tools = result_of(&answer)["tools"].as_array().unwrap().clone();
    let support = |name: &str| {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap();
        tool["execution"]["taskSupport"].clone()
    };
    assert_eq!(support("send_email"), "optional");
    assert_eq!(support("generate_report"), "optional");
    assert_eq!(
        support("search"),
        Value::Null,
        "read-only tools are not run as tasks"
    );

    // The rmcp client still shakes hands and calls tools against the completed answers.
    let client = server.connect().await;
    let email = json!({"to": "t@example.com", "subject": "s", "body": "b"});
    call_tool(&client, call("send_email", email.clone())).await;
    call_tool(&client, call("send_email", email)).await;
    assert_eq!(server.stats().await["send_email"], 1);
}

#[tokio::test]
async fn a_call_run_as_a_task_is_answered_at_once_and_its_result_read_later() {
    let server = start(&[("MCP_TASKS", "on")]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let (_, _, created) = server.post(&session, accept, REPORT_AS_TASK).await;
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["id"], 20);
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working");
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(task_id.len(), 64);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));

    let got = task_request(&server, &session, 21, "tasks/get", &task_id).await;
    assert_eq!(
        (&got["id"], &got["result"]["status"]),
        (&json!(21), &json!("working"))
    );

    // tasks/result waits for the task, then gives the tool's own result.
    let result = task_request(&server, &session, 22, "tasks/result", &task_id).await;
    assert_eq!(result["id"], 22);
    assert_eq!(last_text(&result), "Report #1 on \"q3\" is ready.");
    let related = &result["result"]["_meta"]["io.modelcontextprotocol/related-task"];
    assert_eq!(related["taskId"], task_id.as_str());
    let got = task_request(&server, &session, 23, "tasks/get", &task_id).await;
    assert_eq!(got["result"]["status"], "completed");

    // The same call, plain or as a task again, is the same intent: never run twice.
    let plain = REPORT_AS_TASK.replace(r#","task":{"ttl":60000}"#, "");
    let (_, _, replayed) = server.post(&session, accept, &plain).await;
    let replayed: Value = serde_json::from_str(&replayed).unwrap();
    assert_eq!(last_text(&replayed), last_text(&result));
    let (_, _, again) = server.post(&session, accept, REPORT_AS_TASK).await;
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["result"]["task"]["status"], "completed");
    assert_eq!(again["result"]["task"]["taskId"], task_id.as_str());
    assert_eq!(server.stats().await["generate_report"], 1);
}

#[tokio::test]
async fn another_sessions_task_and_an_unknown_task_are_left_to_the_server() {
    let server = start(&[("MCP_TASKS", "on")]);
    let (alice, bob) = (raw_session(&server).await, raw_session(&server).await);
    let accept = "application/json, text/event-stream";
    let (_, _, created) = server.post(&alice, accept, REPORT_AS_TASK).await;
    let created: Value = serde_json::from_str(&created).unwrap();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The layer answers only for tasks this caller can see: the rest go to the server, which
    // knows none of the layer's, so another session's task shows nothing of it.
    for (session, task) in [(&bob, task_id.as_str()), (&alice, &"0".repeat(64))] {
        let answer = task_request(&server, session, 30, "tasks/get", task).await;
        assert!(answer["error"].is_object(), "{answer}");
        assert!(answer["result"].is_null(), "{answer}");
        assert_eq!(answer["id"], 30);
    }
}

#[tokio::test]
async fn tasks_are_answered_by_any_instance_sharing_the_redis_store() {
    let redis = support::redis_server::RedisServer::start();
    let url = redis.url();
    let env = [("MCP_TASKS", "on"), ("REDIS_URL", url.as_str())];
    let (first, second) = (start(&env), start(&env));
    let session = raw_session(&first).await;
    let accept = "application/json, text/event-stream";
    let (_, _, created) = first.post(&session, accept, REPORT_AS_TASK).await;
    let created: Value = serde_json::from_str(&created).unwrap();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    // The second instance has never seen the session: the store is all it needs.
    let got = task_request(&second, &session, 40, "tasks/get", &task_id).await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    let result = task_request(&second, &session, 41, "tasks/result", &task_id).await;
    assert_eq!(last_text(&result), "Report #1 on \"q3\" is ready.");
    assert_eq!(first.stats().await["generate_report"], 1);
    assert_eq!(second.stats().await["generate_report"], 0);
}

#[tokio::test]
async fn the_agent_example_sends_one_email_and_gets_the_report_after_in_progress() {
    let server = start(&[("DEADLINE_MS", "1000")]);
    let agent = support::gateway::example_binary("mcp_agent");
    let output = tokio::process::Command::new(agent)
        .env("MCP_URL", &server.endpoint)
        .output()
        .await
        .expect("the mcp_agent example is built by cargo test");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    let lines: Vec<&str> = printed.lines().collect();
    let sent = "Sent e-mail #1 to ada@example.com (\"Invoice\", 9 characters).";
    assert!(lines[0].ends_with(sent), "{printed}");
    // The retry is told it is a replay, then given the same result.
    assert!(
        lines[1].contains("This exact call already ran"),
        "{printed}"
    );
    assert!(lines[1].ends_with(sent), "{printed}");
    assert!(
        lines[2].contains("This call started the action"),
        "{printed}"
    );
    assert!(
        printed.contains("Report #1 on \"quarterly sales\" is ready."),
        "{printed}"
    );
    let stats = server.stats().await;
    assert_eq!(
        (
            stats["send_email"].clone(),
            stats["generate_report"].clone()
        ),
        (json!(1), json!(1))
    );
}

/// A server whose tools fail: `flaky` with a JSON-RPC internal error on its first call,
/// `decline` with its own `isError: true` result every time.
mod failing {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
    use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpService,
    };
    use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, ServerHandler};
    use tower_idempotency::IdempotencyLayer;
    use tower_layer::Layer;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct Order {
        pub item: String,
    }

    #[derive(Clone, Default)]
    pub struct Tools {
        pub flaky: Arc<AtomicU64>,
        pub decline: Arc<AtomicU64>,
    }

    #[derive(Clone)]
    struct Server {
        tools: Tools,
        tool_router: ToolRouter<Self>,
    }

    #[tool_router]
    impl Server {
        #[tool(description = "Fails with an internal error the first time.")]
        async fn flaky(
            &self,
            Parameters(order): Parameters<Order>,
        ) -> Result<CallToolResult, ErrorData> {
            if self.tools.flaky.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(ErrorData::internal_error("the warehouse is down", None));
            }
            let text = format!("ordered {}", order.item);
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
        }

        #[tool(description = "Declines every order.")]
        async fn decline(&self, Parameters(order): Parameters<Order>) -> CallToolResult {
            let n = self.tools.decline.fetch_add(1, Ordering::SeqCst) + 1;
            let text = format!("declined {} (#{n})", order.item);
            CallToolResult::error(vec![ContentBlock::text(text)])
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for Server {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }
    }

    /// Serves the tools behind the layer on a free loopback port; the endpoint's URL.
    pub async fn serve(tools: Tools) -> String {
        let service = StreamableHttpService::new(
            move || {
                Ok(Server {
                    tools: tools.clone(),
                    tool_router: Server::tool_router(),
                })
            },
            Arc::new(LocalSessionManager::default()),
            Default::default(),
        );
        let app =
            axum::Router::new().nest_service("/mcp", IdempotencyLayer::new().mcp().layer(service));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/mcp")
    }
}

#[tokio::test]
async fn an_internal_error_releases_the_call_and_a_tools_own_error_is_kept() {
    use std::sync::atomic::Ordering;

    let tools = failing::Tools::default();
    let endpoint = failing::serve(tools.clone()).await;
    let transport = StreamableHttpClientTransport::from_uri(endpoint.as_str());
    let client = ClientConfig::default().serve(transport).await.unwrap();
    let order = json!({"item": "lamp"});

    let first = client.call_tool(call("flaky", order.clone())).await;
    assert!(
        first.is_err(),
        "the internal error reaches the caller: {first:?}"
    );
    let retry = call_tool(&client, call("flaky", order.clone())).await;
    assert_eq!(text(&retry), "ordered lamp");
    let replay = call_tool(&client, call("flaky", order.clone())).await;
    assert_eq!(text(&replay), "ordered lamp");
    assert_eq!(
        tools.flaky.load(Ordering::SeqCst),
        2,
        "released once, then kept"
    );

    let declined = call_tool(&client, call("decline", order.clone())).await;
    let again = call_tool(&client, call("decline", order)).await;
    assert_eq!(declined.is_error, Some(true));
    assert_eq!(text(&declined), "declined lamp (#1)");
    assert_eq!(text(&again), text(&declined));
    assert_eq!(
        tools.decline.load(Ordering::SeqCst),
        1,
        "the tool's refusal is kept"
    );
}

const SLOW_EMAIL: &str = r#"{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"send_email","arguments":{"to":"k@example.com","subject":"s","body":"b","delay_ms":900}}}"#;

#[tokio::test]
async fn a_cancelled_protected_call_runs_on_and_its_retry_gets_the_result() {
    let server = start(&[("DEADLINE_MS", "5000")]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let first = server.post(&session, accept, SLOW_EMAIL);
    let cancel_then_retry = async {
        server.started("send_email").await;
        // What an SDK client sends when its own timeout for the request fires.
        let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1","reason":"timed out"}}"#;
        let (status, _, body) = server.post(&session, accept, cancel).await;
        assert_eq!(
            (status, body.as_str()),
            (202, ""),
            "accepted, as a notification"
        );
        server
            .post(&session, accept, &SLOW_EMAIL.replace("c-1", "c-2"))
            .await
    };
    let ((_, _, first), (_, _, retry)) = tokio::join!(first, cancel_then_retry);
    for (answer, id) in [(&first, "c-1"), (&retry, "c-2")] {
        let message: Value = serde_json::from_str(
            answer
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or(answer),
        )
        .unwrap();
        assert_eq!(message["id"], id);
        let text = last_text(&message).as_str().unwrap_or("");
        assert!(text.starts_with("Sent e-mail #1"), "{message}");
    }
    let stats = server.stats().await;
    assert_eq!(
        (stats["send_email"].clone(), stats["cancelled"].clone()),
        (json!(1), json!(0))
    );
}

#[tokio::test]
async fn a_cancellation_of_a_call_forwarded_unprotected_reaches_the_server() {
    let server = start(&[]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    // `search` is read-only: forwarded as it is, so its cancellation is the server's.
    let search = r#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"search","arguments":{"q":"x","delay_ms":3000}}}"#;
    let list = r#"{"jsonrpc":"2.0","id":40,"method":"tools/list"}"#;
    server.post(&session, accept, list).await;
    let searching = server.post(&session, accept, search);
    let cancel = async {
        server.started("search").await;
        let cancel =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41}}"#;
        server.post(&session, accept, cancel).await
    };
    let (_, (status, _, _)) = tokio::join!(searching, cancel);
    assert_eq!(status, 202);
    // The server acts on a notification after it has answered it 202.
    let limit = Duration::from_secs(5);
    eventually("the server counted the cancellation", limit, || async {
        (server.stats().await["cancelled"] == 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_client_that_closes_its_stream_does_not_stop_the_call() {
    use tokio::io::AsyncWriteExt;
    let server = start(&[("DEADLINE_MS", "5000")]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let body = SLOW_EMAIL.replace("k@example.com", "closed@example.com");
    let host = server
        .endpoint
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    // The 2026 revision cancels a call by closing its POST's stream.
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: {accept}\r\nmcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    server.started("send_email").await;
    drop(stream);
    let (_, _, retry) = server
        .post(&session, accept, &body.replace("c-1", "c-3"))
        .await;
    let message: Value = serde_json::from_str(
        retry
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(&retry),
    )
    .unwrap();
    assert!(
        last_text(&message)
            .as_str()
            .unwrap_or("")
            .starts_with("Sent e-mail #1"),
        "{message}"
    );
    let stats = server.stats().await;
    assert_eq!(
        (stats["send_email"].clone(), stats["cancelled"].clone()),
        (json!(1), json!(0))
    );
}

/// A session id and the first text answer of one call, with `x-user` set to `user`.
async fn call_as(server: &Server, user: &str, session: &str, id: u32) -> (u16, Value) {
    let headers: &[(&str, &str)] = if user.is_empty() {
        &[]
    } else {
        &[("x-user", user)]
    };
    call_with(server, headers, session, id).await
}

/// The same, with `headers` sent besides the session's.
async fn call_with(
    server: &Server,
    headers: &[(&str, &str)],
    session: &str,
    id: u32,
) -> (u16, Value) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"send_email","arguments":{{"to":"p@example.com","subject":"s","body":"b"}}}}}}"#
    );
    let mut request = server.process.client.http.post(&server.endpoint);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let data = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(&text);
    (status, serde_json::from_str(data).unwrap())
}

#[tokio::test]
async fn a_session_id_never_replaces_the_configured_principal() {
    let server = start(&[("PRINCIPAL_HEADER", "x-user")]);
    let session = raw_session(&server).await;
    let text = |answer: &Value| last_text(answer).as_str().unwrap_or("").to_owned();
    let (_, alice) = call_as(&server, "alice", &session, 1).await;
    assert!(text(&alice).starts_with("Sent e-mail #1"), "{alice}");
    // Mallory reuses Alice's session id: she neither reads Alice's result nor plants her own.
    let (_, mallory) = call_as(&server, "mallory", &session, 2).await;
    assert!(text(&mallory).starts_with("Sent e-mail #2"), "{mallory}");
    let (_, again) = call_as(&server, "alice", &session, 3).await;
    assert_eq!(text(&again), text(&alice));
    // Without the principal nothing runs, and the answer says what to send.
    let (_, anonymous) = call_as(&server, "", &session, 4).await;
    assert_eq!(anonymous["result"]["isError"], true, "{anonymous}");
    assert!(
        text(&anonymous).starts_with("The action was not executed"),
        "{anonymous}"
    );
    assert!(text(&anonymous).contains("x-user"), "{anonymous}");
    assert_eq!(server.stats().await["send_email"], 2);
}

#[tokio::test]
async fn two_credentials_sending_one_session_id_never_share_a_result() {
    let server = start(&[]);
    let session = raw_session(&server).await;
    let text = |answer: &Value| last_text(answer).as_str().unwrap_or("").to_owned();
    let as_caller = |token: &'static str, id| {
        let (server, session) = (&server, &session);
        async move { call_with(server, &[("authorization", token)], session, id).await }
    };
    let (_, a) = as_caller("Bearer A", 1).await;
    assert!(text(&a).starts_with("Sent e-mail #1"), "{a}");
    let (_, b) = as_caller("Bearer B", 2).await;
    assert!(text(&b).starts_with("Sent e-mail #2"), "{b}");
    let (_, again) = as_caller("Bearer A", 3).await;
    assert_eq!(text(&again), text(&a));
    assert_eq!(server.stats().await["send_email"], 2);
}

#[tokio::test]
async fn a_task_and_the_plain_call_of_the_same_arguments_are_one_intent_for_any_number() {
    let server = start(&[("MCP_TASKS", "on")]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    // Numbers no f64 holds exactly, and a double that looks like an integer.
    let plain = r#"{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"generate_report","arguments":{"topic":"n","seconds":0.0,"ref":123456789012345678901234567890,"rate":1.10}}}"#;
    let (_, _, first) = server.post(&session, accept, plain).await;
    let first: Value = serde_json::from_str(&first).unwrap();
    assert!(last_text(&first).as_str().unwrap().starts_with("Report #1"));
    let as_task = plain
        .replace(r#""id":50"#, r#""id":51"#)
        .replace(r#""rate":1.10}"#, r#""rate":1.10},"task":{"ttl":60000}"#);
    let (_, _, task) = server.post(&session, accept, &as_task).await;
    let task: Value = serde_json::from_str(&task).unwrap();
    assert_eq!(task["result"]["task"]["status"], "completed", "{task}");
    assert_eq!(server.stats().await["generate_report"], 1);
}

#[tokio::test]
async fn a_call_whose_arguments_name_a_member_twice_is_refused_as_ambiguous() {
    let server = start(&[]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let twice = r#"{"jsonrpc":"2.0","id":60,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"a@example.com","to":"b@example.com","subject":"s","body":"b"}}}"#;
    let (status, _, answer) = server.post(&session, accept, twice).await;
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!((status, &answer["id"]), (200, &json!(60)));
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["error"]["data"]["outcome"], "not_executed");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Nothing was executed"));
    assert_eq!(server.stats().await["send_email"], 0);
}

#[tokio::test]
async fn a_replayed_result_tells_the_model_that_the_call_already_ran() {
    let server = start(&[]);
    let client = server.connect().await;
    let email = json!({"to": "n@example.com", "subject": "s", "body": "b"});
    let first = call_tool(&client, call("send_email", email.clone())).await;
    let retry = call_tool(&client, call("send_email", email)).await;
    let notice = &retry.content[0].as_text().expect("a text block").text;
    assert!(
        notice.starts_with("This exact call already ran") && notice.contains("was not run again"),
        "{notice}"
    );
    assert_eq!(
        retry.content[1].as_text().unwrap().text,
        text(&first),
        "the kept result follows"
    );
    let meta = retry.meta.as_ref().expect("_meta on the replay");
    assert_eq!(meta.0["tower-idempotency/replay"]["replayed"], true);
    assert_eq!(server.stats().await["send_email"], 1);

    // Turned off, a replay is the kept result as it was.
    let server = start(&[("MCP_REPLAY_NOTICE", "off")]);
    let client = server.connect().await;
    let email = json!({"to": "n@example.com", "subject": "s", "body": "b"});
    let first = call_tool(&client, call("send_email", email.clone())).await;
    let retry = call_tool(&client, call("send_email", email)).await;
    assert_eq!(retry.content, first.content);
}

#[tokio::test]
async fn the_status_path_in_mcp_mode_never_shows_the_layers_private_marker() {
    let server = start(&[]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let body = r#"{"jsonrpc":"2.0","id":70,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"m@example.com","subject":"s","body":"b"}}}"#;
    let response = server
        .process
        .client
        .http
        .post(&server.endpoint)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(body)
        .send()
        .await
        .unwrap();
    let intent = response.headers()["idempotency-intent"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(response
        .headers()
        .keys()
        .all(|name| !name.as_str().starts_with("x-tower-idempotency")));
    response.text().await.unwrap();
    let status = server
        .process
        .client
        .http
        .get(format!("{}/_idempotency/{intent}", server.endpoint))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);
    assert!(
        status
            .headers()
            .keys()
            .all(|name| !name.as_str().starts_with("x-tower-idempotency")),
        "{:?}",
        status.headers()
    );
    let message: Value = status.json().await.unwrap();
    assert!(last_text(&message)
        .as_str()
        .unwrap()
        .starts_with("Sent e-mail #1"));
}

#[tokio::test]
async fn an_answer_over_the_response_limit_ran_once_and_is_not_run_again() {
    let server = start(&[("RESPONSE_LIMIT", "300")]);
    let client = server.connect().await;
    let long = "x".repeat(400);
    let email = json!({"to": "big@example.com", "subject": long, "body": "b"});
    let first = call_tool(&client, call("send_email", email.clone())).await;
    assert!(
        text(&first).starts_with("Sent e-mail #1"),
        "the first caller gets it all"
    );
    let again = call_tool(&client, call("send_email", email)).await;
    assert!(
        text(&again).starts_with("This action already ran"),
        "{}",
        text(&again)
    );
    assert_eq!(
        server.stats().await["send_email"],
        1,
        "never released into a second run"
    );
}

#[tokio::test]
async fn a_task_still_running_is_answered_in_task_terms() {
    let server = start(&[("MCP_TASKS", "on"), ("DEADLINE_MS", "200")]);
    let session = raw_session(&server).await;
    let accept = "application/json, text/event-stream";
    let slow = REPORT_AS_TASK.replace(r#""seconds":0.8"#, r#""seconds":1.5"#);
    let (_, _, created) = server.post(&session, accept, &slow).await;
    let created: Value = serde_json::from_str(&created).unwrap();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = task_request(&server, &session, 24, "tasks/result", &task_id).await;
    let text = last_text(&result).as_str().unwrap_or_default();
    assert!(text.starts_with("This task is still running"), "{result}");
    assert!(text.contains("tasks/result"), "{result}");
    assert_eq!(result["result"]["isError"], false);
    assert_eq!(
        result["result"]["structuredContent"]["outcome"],
        "in_progress"
    );
    let related = &result["result"]["_meta"]["io.modelcontextprotocol/related-task"];
    assert_eq!(related["taskId"], task_id.as_str());
}

//! An MCP server (the `rmcp` SDK over Streamable HTTP) behind `IdempotencyLayer` in MCP mode.
//!
//! ```text
//! cargo run --features mcp --example mcp_server
//! curl -s localhost:3001/stats
//! ```
//!
//! Tools: `send_email` (`to`, `subject`, `body`, optional `delay_ms`), `generate_report`
//! (`topic`, `seconds`), `regional_send` (`to`, `region`: its schema asks 2026-07-28 clients to
//! repeat the region in an `Mcp-Param-Region` header) and `search` (`q`, optional `delay_ms`;
//! annotated read-only, so never stored). `GET /stats` counts the executions of each tool in this process, and the calls
//! that the server saw cancelled (`cancelled`): `send_email` and `search` honour a client's
//! `notifications/cancelled` while they wait, as servers that support cancellation do, and
//! answer it with the error some SDK servers send ("Request cancelled").
//!
//! Environment: `ADDR` (default `127.0.0.1:3001`), `DEADLINE_MS` (default 25000: how long a
//! call waits before it is told "in progress"), `IDEMPOTENCY` (`on` by default; `off` serves
//! the bare server), `MCP_TASKS` (`on` serves MCP tasks, an experimental part of the
//! specification: off by default), `MCP_REPLAY_NOTICE` (`off` replays kept results without
//! the notice that they are replays), `RESPONSE_LIMIT` (bytes: the largest answer kept for
//! replay, default 1 MiB), `SHUTDOWN_GRACE_MS` (default 25000: on SIGTERM or Ctrl-C
//! the server stops accepting and lets running calls finish and record for up to this long),
//! `PRINCIPAL_HEADER` (the header that an authenticating
//! proxy in front sets, such as `x-user`: the scope is then that principal, narrowed by the
//! MCP session where the client has one; with `PRINCIPAL_ONLY=on`, the principal alone, so
//! that a result is replayed to the same principal in any session and in either protocol
//! era), `MCP_SHARED_SCOPE` (`on` gives every caller that
//! brings no principal, session or credential one shared scope: for a server with one user).
//! Without a principal, a handshake-era caller is named by its session and a 2026-07-28
//! caller, which has none, by its `Authorization` header; one with neither is refused, and
//! the server says so when it starts. With the `redis` feature, `REDIS_URL` puts the tiered
//! Redis store behind the layer, shared by every instance pointed at it.
//!
//! The official Python SDK's `Client`, left at its defaults, speaks 2026-07-28 to it:
//!
//! ```text
//! MCP_SHARED_SCOPE=on cargo run --features mcp --example mcp_server
//! python -c 'import asyncio, mcp
//! async def main():
//!     async with mcp.Client("http://127.0.0.1:3001/mcp") as client:
//!         print(await client.call_tool("send_email", {"to": "ada@example.com", "subject": "Hi", "body": "Hello"}))
//! asyncio.run(main())'
//! ```

#[path = "support/shutdown.rs"]
mod shutdown;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::{Json, Router};
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{ErrorCode, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tower_idempotency::store::Store;
use tower_idempotency::IdempotencyLayer;
use tower_layer::Layer;

/// Executions started per tool in this process.
#[derive(Default)]
struct Stats {
    send_email: AtomicU64,
    generate_report: AtomicU64,
    regional_send: AtomicU64,
    search: AtomicU64,
    cancelled: AtomicU64,
}

fn bump(counter: &AtomicU64) -> u64 {
    counter.fetch_add(1, Ordering::SeqCst) + 1
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Email {
    /// The recipient's address.
    to: String,
    subject: String,
    body: String,
    /// How long sending takes, in milliseconds.
    #[serde(default)]
    delay_ms: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Report {
    topic: String,
    /// How long the report takes, in seconds.
    #[serde(default)]
    seconds: f64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Regional {
    to: String,
    /// Where the e-mail leaves from, repeated in the `Mcp-Param-Region` header.
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Search {
    q: String,
    /// How long searching takes, in milliseconds.
    #[serde(default)]
    delay_ms: u64,
}

#[derive(Clone)]
struct Tools {
    stats: Arc<Stats>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Tools {
    #[tool(description = "Send an e-mail. Sending twice sends two e-mails.")]
    async fn send_email(
        &self,
        Parameters(email): Parameters<Email>,
        cancelled: CancellationToken,
    ) -> Result<String, ErrorData> {
        let n = bump(&self.stats.send_email);
        self.wait(email.delay_ms, &cancelled).await?;
        Ok(format!(
            "Sent e-mail #{n} to {} ({:?}, {} characters).",
            email.to,
            email.subject,
            email.body.chars().count()
        ))
    }

    #[tool(description = "Write a report on a topic; it takes a while.")]
    async fn generate_report(&self, Parameters(report): Parameters<Report>) -> String {
        let n = bump(&self.stats.generate_report);
        if report.seconds > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(report.seconds)).await;
        }
        format!("Report #{n} on {:?} is ready.", report.topic)
    }

    #[tool(description = "Send an e-mail from a region. Sending twice sends two e-mails.")]
    async fn regional_send(&self, Parameters(sent): Parameters<Regional>) -> String {
        let n = bump(&self.stats.regional_send);
        format!("Sent e-mail #{n} to {} from {}.", sent.to, sent.region)
    }

    #[tool(
        description = "Search the archive.",
        annotations(read_only_hint = true)
    )]
    async fn search(
        &self,
        Parameters(search): Parameters<Search>,
        cancelled: CancellationToken,
    ) -> Result<String, ErrorData> {
        let n = bump(&self.stats.search);
        self.wait(search.delay_ms, &cancelled).await?;
        Ok(format!("Search #{n}: no results for {:?}.", search.q))
    }
}

impl Tools {
    /// Waits `delay_ms`, unless the client cancels the call first.
    async fn wait(&self, delay_ms: u64, cancelled: &CancellationToken) -> Result<(), ErrorData> {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(delay_ms)) => Ok(()),
            () = cancelled.cancelled() => {
                bump(&self.stats.cancelled);
                Err(ErrorData::new(ErrorCode(0), "Request cancelled", None))
            }
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not valid")),
        Err(_) => default,
    }
}

/// The MCP endpoint: the rmcp service, behind the layer unless `IDEMPOTENCY=off`.
fn endpoint<St: Store>(stats: &Arc<Stats>, layer: Option<IdempotencyLayer<St>>) -> Router {
    let stats = Arc::clone(stats);
    let server = StreamableHttpService::new(
        move || {
            Ok(Tools {
                stats: Arc::clone(&stats),
                tool_router: Tools::tool_router(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let tasks = std::env::var("MCP_TASKS").is_ok_and(|v| v == "on");
    let notice = std::env::var("MCP_REPLAY_NOTICE").map_or(true, |v| v != "off");
    let shared = std::env::var("MCP_SHARED_SCOPE").is_ok_and(|v| v == "on");
    let Some(layer) = layer else {
        return Router::new().nest_service("/mcp", server);
    };
    let mut layer = layer.mcp();
    if std::env::var("PRINCIPAL_ONLY").is_ok_and(|v| v == "on") {
        layer = layer.scope_by_principal();
    }
    if shared {
        layer = layer.shared_scope();
    } else if !layer.has_principal() {
        eprintln!(
            "warning: no principal is configured (PRINCIPAL_HEADER): protocol 2026-07-28 \
             callers, which have no session, are told apart by their Authorization header, and \
             calls without one are refused; for a server with one user, set MCP_SHARED_SCOPE=on"
        );
    }
    if tasks {
        layer = layer.tasks();
    }
    if !notice {
        layer = layer.no_replay_notice();
    }
    Router::new().nest_service("/mcp", layer.layer(server))
}

async fn serve<St: Store>(addr: SocketAddr, layer: Option<IdempotencyLayer<St>>) {
    let executions = layer.as_ref().map(IdempotencyLayer::detached);
    let stats = Arc::new(Stats::default());
    let counts = Arc::clone(&stats);
    let read = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
    let app = endpoint(&stats, layer).route(
        "/stats",
        get(move || {
            let stats = Json::<Value>(json!({
                "send_email": read(&counts.send_email),
                "generate_report": read(&counts.generate_report),
                "regional_send": read(&counts.regional_send),
                "search": read(&counts.search),
                "cancelled": read(&counts.cancelled),
            }));
            std::future::ready(stats)
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind ADDR");
    let addr = listener.local_addr().expect("bound address");
    println!("listening on http://{addr}/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown::signal())
        .await
        .expect("serve");
    // Calls still running finish and record their outcome before the process exits.
    if let Some(executions) = executions {
        executions.wait_for(shutdown::grace()).await;
    }
}

/// The layer as `DEADLINE_MS` sets it up, over `store`.
fn layer<St: Store>(store: St) -> IdempotencyLayer<St> {
    let deadline = Duration::from_millis(env_or("DEADLINE_MS", 25_000));
    let mut layer = IdempotencyLayer::with_store(store).deadline(deadline);
    if let Ok(limit) = std::env::var("RESPONSE_LIMIT") {
        layer = layer.response_limit(limit.parse().expect("RESPONSE_LIMIT is a number of bytes"));
    }
    match std::env::var("PRINCIPAL_HEADER") {
        Ok(name) => layer.scope_header(name.parse().expect("PRINCIPAL_HEADER is a header name")),
        Err(_) => layer,
    }
}

#[tokio::main]
async fn main() {
    let addr: SocketAddr = env_or("ADDR", SocketAddr::from(([127, 0, 0, 1], 3001)));
    let idempotency = std::env::var("IDEMPOTENCY").unwrap_or_else(|_| "on".into());
    match idempotency.as_str() {
        "off" => serve::<tower_idempotency::store::MemoryStore>(addr, None).await,
        "on" => {
            #[cfg(feature = "redis")]
            if let Ok(url) = std::env::var("REDIS_URL") {
                let store = tower_idempotency::store::RedisStore::connect(&url)
                    .await
                    .expect("connect to REDIS_URL")
                    .tiered();
                return serve(addr, Some(layer(store))).await;
            }
            assert!(
                cfg!(feature = "redis") || std::env::var_os("REDIS_URL").is_none(),
                "REDIS_URL needs the redis feature: cargo run --features mcp,redis"
            );
            let store = tower_idempotency::store::MemoryStore::new();
            serve(addr, Some(layer(store))).await
        }
        other => panic!("IDEMPOTENCY={other:?}: use on or off"),
    }
}

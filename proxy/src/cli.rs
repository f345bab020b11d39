//! The command line: a configuration file and flags for the common settings.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Puts an idempotency layer in front of an HTTP tool API or MCP server: repeated calls of
/// one intent run once, concurrent duplicates wait for the running one, later ones are
/// replayed, and a caller past its deadline is told "in progress, ask later".
///
/// Flags override the file's settings of the same name.
#[derive(Debug, Parser)]
#[command(name = "idempotency-proxy", version)]
pub struct Cli {
    /// A TOML configuration file (routes, store, scope, limits, timeouts, logs).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The upstream's base URL (`http://127.0.0.1:8000`); `upstream.url` in the file.
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// Where to accept connections; `listen` in the file (default 127.0.0.1:3000).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// A Redis server for the store, shared by every instance (`redis://HOST:PORT`);
    /// `store.redis_url` in the file. Without it, or a cluster, the store is in memory.
    #[arg(long, value_name = "URL", conflicts_with = "redis_cluster_urls")]
    pub redis_url: Option<String>,
    /// A PostgreSQL database for the store, shared by every instance
    /// (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`); `store.postgres_url` in the file. The
    /// proxy makes its tables there if they do not exist.
    #[arg(long, value_name = "URL", conflicts_with_all = ["redis_url", "redis_cluster_urls"])]
    pub postgres_url: Option<String>,
    /// The nodes of a Redis Cluster, comma-separated; `store.redis_cluster_urls` in the file.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub redis_cluster_urls: Vec<String>,
    /// The header that names the caller's session (default `x-session-id`);
    /// `scope.header` in the file.
    #[arg(long, value_name = "NAME")]
    pub scope_header: Option<String>,
    /// A header that a trusted gateway in front sets to the authenticated principal: it is
    /// then required, and the session only narrows it; `scope.principal_header`.
    #[arg(long, value_name = "NAME")]
    pub principal_header: Option<String>,
    /// How long a caller waits before it is told "in progress, ask later" (`20s`);
    /// `defaults.deadline` in the file.
    #[arg(long, value_name = "DURATION")]
    pub deadline: Option<String>,
    /// A path served in MCP mode (Streamable HTTP, `tools/call` protected); repeatable.
    #[arg(long, value_name = "PATH")]
    pub mcp: Vec<String>,
    /// MCP routes serve one user: every caller that no principal, session or `Authorization`
    /// credential names shares one scope, rather than being refused (protocol 2026-07-28
    /// has no session); `scope.mcp_shared` in the file.
    #[arg(long)]
    pub mcp_shared_scope: bool,
    /// MCP routes check each tool call's arguments against the `inputSchema` its tool was
    /// listed with: a call that breaks it is answered with a tool error naming each violation
    /// and never reaches the server; `validate_arguments = true` per route in the file.
    #[arg(long)]
    pub mcp_validate_arguments: bool,
    /// An MCP tool whose calls pass through unprotected, whatever the server declares (a tool
    /// that is safe to repeat); repeatable; `mode = "pass"` in a `[[tools]]` entry.
    #[arg(long, value_name = "NAME")]
    pub pass_tool: Vec<String>,
    /// Observe mode on every protected and MCP route: calls are keyed and their repeats
    /// counted, and every call is passed on untouched (nothing refused, replayed or
    /// coalesced); `observe = true` per route, or in `[defaults]`, in the file.
    #[arg(long)]
    pub observe: bool,
    /// The proxies in front whose forwarding headers (`forwarded`, `x-forwarded-*`) are kept
    /// and extended, as CIDRs or addresses, comma-separated (`10.0.0.0/8,127.0.0.1`); a
    /// client's own are otherwise dropped; `trusted_proxies` in the file.
    #[arg(long, value_name = "CIDRS", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,
    /// Where to serve `/healthz`, `/readyz` and `/metrics`; `metrics_listen` in the file.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// The header that carries each call's id: read, or set to a new UUID v7 where a request
    /// has none, passed on and given back (default `x-request-id`);
    /// `telemetry.request_id_header` in the file.
    #[arg(long, value_name = "NAME")]
    pub request_id_header: Option<String>,
    /// An OpenTelemetry collector to send each call's spans to (`http://HOST:4318` for
    /// OTLP/HTTP, `http://HOST:4317` for gRPC); `telemetry.otlp_endpoint` in the file.
    /// Without it no exporter runs.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// How spans reach the collector: `grpc` or `http` (protobuf); by default gRPC on port
    /// 4317 and HTTP elsewhere; `telemetry.otlp_protocol` in the file.
    #[arg(long, value_name = "PROTOCOL", value_enum)]
    pub otlp_protocol: Option<crate::config::OtlpProtocol>,
    /// Serves the admin API (`/admin/...`) on the metrics listener to requests with
    /// `Authorization: Bearer TOKEN`; `admin_token` in the file. Off without it.
    #[arg(long, value_name = "TOKEN")]
    pub admin_token: Option<String>,
    /// Something to do other than serving.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What the process does instead of serving.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prints one intent's story (each attempt's claim and outcome, an operator's resolution,
    /// with times and the instance that made each) from a running proxy's admin API, as a
    /// table.
    Inspect(Inspect),
}

/// `inspect`'s arguments.
#[derive(Debug, Args)]
pub struct Inspect {
    /// The intent: 64 hex digits, as the `idempotency-intent` header and the listings give it.
    pub intent: String,
    /// The proxy's metrics listener, where it serves the admin API (`http://127.0.0.1:9090`).
    #[arg(long, value_name = "URL", env = "IDEMPOTENCY_ADMIN_URL")]
    pub admin_url: String,
    /// The admin API's token; better from the environment, which the process list does not
    /// show.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "IDEMPOTENCY_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub admin_token: String,
}

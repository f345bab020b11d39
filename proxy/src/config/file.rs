//! The configuration file as written: every table and key it may hold. Unknown keys are
//! refused, so a misspelt setting is an error, not a default.

use serde::Deserialize;
use toml::Spanned;

use super::values::{Addr, Dur, Header, Pointer, Prefix, UpstreamUrl};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct File {
    pub listen: Option<Addr>,
    pub metrics_listen: Option<Addr>,
    /// The admin API's bearer token, on the metrics listener.
    pub admin_token: Option<String>,
    pub log_format: Option<LogFormat>,
    /// How long a shutdown waits for running executions to finish and record.
    pub shutdown_grace: Option<Dur>,
    /// The proxies in front whose forwarding headers are kept and extended (CIDRs).
    pub trusted_proxies: Option<Spanned<Vec<String>>>,
    pub upstream: UpstreamTable,
    pub store: StoreTable,
    pub scope: ScopeTable,
    pub limits: LimitsTable,
    /// The settings of every path no route names.
    pub defaults: RouteTable,
    pub routes: Vec<Spanned<RouteTable>>,
    /// The settings of one MCP tool, on every MCP route.
    pub tools: Vec<Spanned<ToolTable>>,
    pub telemetry: TelemetryTable,
}

/// Request ids and traces.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryTable {
    /// The header that carries each call's id.
    pub request_id_header: Option<Header>,
    /// An OTLP collector to send spans to.
    pub otlp_endpoint: Option<super::telemetry::EndpointSetting>,
    pub otlp_protocol: Option<super::telemetry::OtlpProtocol>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamTable {
    pub url: Option<UpstreamUrl>,
    pub host: Option<HostHeader>,
    pub connect_timeout: Option<Dur>,
    /// The default wait for the upstream's answer, per route below.
    pub timeout: Option<Dur>,
    pub pool_idle_timeout: Option<Dur>,
    pub pool_max_idle_per_host: Option<usize>,
    /// An `https://` upstream: more authorities to trust, in PEM, beside the system's.
    pub ca_file: Option<std::path::PathBuf>,
    /// An `https://` upstream that asks for a client certificate: the chain and its key.
    pub client_cert: Option<std::path::PathBuf>,
    pub client_key: Option<std::path::PathBuf>,
}

/// What the upstream is sent as `Host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostHeader {
    /// The client's own `Host`.
    Keep,
    /// The upstream URL's host and port.
    Rewrite,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreTable {
    pub redis_url: Option<Spanned<String>>,
    pub redis_cluster_urls: Option<Spanned<Vec<String>>>,
    pub postgres_url: Option<Spanned<String>>,
    /// The prefix of every Redis key.
    pub prefix: Option<String>,
    /// The memory store's byte budget (and the tiered store's local cache).
    pub memory_max_bytes: Option<u64>,
    /// How long the local cache in front of a shared store keeps a copy.
    pub local_ttl: Option<Dur>,
    /// How long one store call may take.
    pub call_timeout: Option<Dur>,
    /// Run the action when the store cannot answer (counted and logged) instead of
    /// answering 503 `not_executed`.
    pub fail_open: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScopeTable {
    pub header: Option<Header>,
    pub principal_header: Option<Header>,
    /// The headers whose values, hashed, name a caller where no principal header is set.
    pub credential_headers: Option<Vec<Header>>,
    pub missing: Option<MissingScope>,
    /// MCP routes: one scope shared by every caller that no principal, session or
    /// credential names (a server with one user).
    pub mcp_shared: Option<bool>,
}

/// A protected request without a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MissingScope {
    /// Answered 400, nothing executed.
    Refuse,
    /// Forwarded unprotected.
    Pass,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsTable {
    /// The largest request body a protected route reads, in bytes.
    pub body: Option<usize>,
    /// The largest answer kept for replay, in bytes; larger ones stream to their first caller.
    pub response: Option<usize>,
    /// Executions running detached from their callers at once.
    pub max_detached: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouteTable {
    pub prefix: Option<Prefix>,
    pub mode: Option<Mode>,
    pub deadline: Option<Dur>,
    pub retention: Option<Dur>,
    pub max_execution: Option<Dur>,
    /// The upstream's answer is awaited this long.
    pub timeout: Option<Dur>,
    pub ignore_fields: Vec<Pointer>,
    pub key_header: Option<Header>,
    pub key_field: Option<Pointer>,
    /// Keyed and counted, never enforced (observe mode).
    pub observe: Option<bool>,
    /// The retry budget: the base of the backoff after two failures in a row.
    pub retry_backoff: Option<Dur>,
    /// The retry budget: failures in a row before the cooldown; 0 turns the budget off.
    pub max_failures: Option<u32>,
    /// The retry budget: how long an intent that failed `max_failures` times waits.
    pub failure_cooldown: Option<Dur>,
    /// MCP routes: a tool call's arguments checked against its tool's listed `inputSchema`.
    pub validate_arguments: Option<bool>,
}

/// One MCP tool's settings, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolTable {
    pub name: Option<String>,
    pub mode: Option<ToolMode>,
    pub deadline: Option<Dur>,
    pub retention: Option<Dur>,
    /// JSON Pointers into the tool's arguments left out of its calls' key.
    pub ignore_arguments: Vec<Pointer>,
    /// This tool's retry budget, over the defaults' (see [`RouteTable`]).
    pub retry_backoff: Option<Dur>,
    pub max_failures: Option<u32>,
    pub failure_cooldown: Option<Dur>,
}

/// How one MCP tool's calls are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// Run once per intent, whatever the server declares.
    Protect,
    /// Forwarded as they are, whatever the server declares.
    Pass,
}

/// How a route's requests are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Unsafe methods run once per intent.
    Protect,
    /// Forwarded as they are, streaming.
    Pass,
    /// An MCP Streamable HTTP endpoint: `tools/call` runs once per intent.
    Mcp,
}

//! The MCP mode: protects the tools of a Model Context Protocol server served over
//! Streamable HTTP (one `POST /mcp` endpoint, JSON-RPC 2.0 bodies), for clients of both eras
//! of the protocol on one endpoint: the handshake era (2024-11-05 to 2025-11-25: `initialize`,
//! then a `Mcp-Session-Id`) and 2026-07-28 (self-contained requests, no session).
//!
//! [`IdempotencyLayer::mcp`](crate::IdempotencyLayer::mcp) turns a configured layer into an
//! [`McpIdempotencyLayer`]. For a `tools/call`:
//!
//! - **the era** is read per request, as servers read it: `MCP-Protocol-Version`, else the
//!   version in `params._meta`, else the handshake era. Requests are forwarded with their
//!   bytes and headers unchanged. Where the layer answers for the server, it refuses what the
//!   server would, nothing executed: a version it does not know (HTTP 400, `-32022`, the
//!   versions it knows), and in 2026-07-28 routing headers (`MCP-Protocol-Version`,
//!   `Mcp-Method`, `Mcp-Name`) that do not say what the body says (HTTP 400, `-32020`). Every
//!   answer it writes, replays included, is fitted to the era it goes to when it is sent:
//!   `resultType` in 2026-07-28, none before;
//! - **the key** is the scope and the canonical JSON of the request without its `id`,
//!   `params.task` and the `params._meta` members the protocol defines per attempt (the
//!   progress token, the version, the client's name, capabilities and log level, the trace
//!   context); an emptied `_meta` counts as absent, and any other `_meta` member is part of
//!   the intent. A retry with a new JSON-RPC id is the same intent;
//! - **the scope** is the configured principal ([`IdempotencyLayer::scope_header`](crate::IdempotencyLayer::scope_header),
//!   [`IdempotencyLayer::scope_fn`](crate::IdempotencyLayer::scope_fn)), required and narrowed
//!   by the session where there is one ([`McpIdempotencyLayer::scope_by_principal`] leaves the
//!   session out); without one, the session; without a session (2026-07-28), the
//!   `Authorization` credential, hashed, so that two bearer tokens never share a result (a
//!   token refreshed between a call and its retry starts a new scope); else one shared scope
//!   where the operator opts in ([`McpIdempotencyLayer::shared_scope`], a server with one
//!   user); else the call is refused with a tool result that says so. 2026-07-28 has no
//!   conversation id: one user's parallel conversations share results unless a principal
//!   narrower than the user is configured;
//! - **cancellations stay with the layer**: a client's `notifications/cancelled` for a
//!   protected call is answered (202) and not passed on, so the execution goes on for every
//!   caller waiting on it and its retry gets the result; only a request this instance
//!   forwarded unprotected for the same session and credential is the server's to cancel. A
//!   client that closes its stream (how a 2026-07-28 client cancels) cannot stop the
//!   execution either: it runs detached;
//! - **answers carry the caller's id**: the kept JSON-RPC response is replayed with the id of
//!   the request it answers, as `application/json` or, for a client that accepts only that,
//!   as an SSE stream of one event. An SSE answer from the server is kept as its final
//!   JSON-RPC response (progress notifications before it are not replayed). A stream that
//!   ends after a priming event (an event with an id) before the answer is resumed by the
//!   layer in the handshake era (`GET` with `Last-Event-ID`, through the inner service, after
//!   the server's `retry`, bounded); where it cannot be, the call is recorded "may have run";
//! - **kept or released**: a result whose `resultType` is absent or `complete` is kept,
//!   `isError: true` included, since it is the tool's own answer; so are the deterministic
//!   JSON-RPC refusals (-32600 invalid request, -32601 unknown method, -32602 invalid params)
//!   and every code outside JSON-RPC's reserved range (-32768 to -32000). A result asking for
//!   input (`input_required`), every other reserved code (-32603 internal error, -32700, the
//!   -32000 to -32099 server errors) and an HTTP error from the server (an unknown session;
//!   in 2026-07-28, -32601 as 404 and -32602, -32020 or -32022 as 400, from which the SDKs
//!   recover by themselves) release the key, so that a retry runs. A stream that ends without
//!   the answer, one that breaks off once primed, an answer to another request, and a task the
//!   server made of the call are recorded "may have run", never released; a body that breaks
//!   off before, unmarked, releases the key as in HTTP mode. The layer's
//!   [`classify`](crate::IdempotencyLayer::classify) rule does not apply in this mode;
//! - **in progress**: past its deadline, a call is answered with a `CallToolResult` whose text
//!   says that the action is already running and must not be repeated with new arguments,
//!   and whose `structuredContent` holds `outcome: "in_progress"`, `retry_after_s` and the
//!   `intent`. Calling again with the same arguments later gets the real result. It is not
//!   an error (`isError: false`) for a tool that a `tools/list` answer passing through the
//!   layer listed without an `outputSchema`; otherwise it is marked `isError: true`, since a
//!   result that is not an error must match the tool's output schema, and clients check it
//!   (the official Python SDK's client raises on one that does not). Every other answer the
//!   layer writes to a `tools/call` (not executed, failed, may have run) is a `CallToolResult`
//!   with `isError: true` whose text says first what happened and whether calling again is
//!   safe; JSON-RPC errors only where the protocol calls for one;
//! - **read-only tools pass through**: a tool that a `tools/list` answer passing through the
//!   layer annotates `readOnlyHint: true` is not protected, unless the configuration says
//!   otherwise ([`McpIdempotencyLayer::protect_tool`], [`McpIdempotencyLayer::pass_through_tool`]).
//!   What the listings declare is kept per server (the authority and path of its calls);
//! - **arguments checked**, with the `contract` feature and `validate_arguments(true)`: a call
//!   whose arguments break the `inputSchema` its tool was listed with is answered, unrun, with
//!   a tool error naming each violation by JSON Pointer (see `docs/mcp.md`).
//!
//! Every other message (`initialize`, `server/discover`, `tools/list`, notifications, `ping`,
//! responses, the `GET` stream and `DELETE`) passes through untouched. A batch that holds a
//! `tools/call`, a `tools/call` without an id or without `params.name` is refused with a
//! JSON-RPC error, nothing executed.
//!
//! What the server says during a protected call on its event stream (progress, log messages,
//! its own requests such as an elicitation) is relayed to the caller as it comes, and a
//! request of the server's still waiting for its answer is asked again of a retry that takes
//! over from a caller that gave up; only the answer is kept (see `docs/mcp.md`).
//!
//! With [`McpIdempotencyLayer::tasks`], a call still running at its deadline is answered with
//! a task for a 2026-07-28 client that names the tasks extension (`io.modelcontextprotocol/tasks`)
//! in its capabilities, and `tasks/get`, `tasks/update` and `tasks/cancel` (absorbed) for it are
//! answered from the store; a handshake-era call that asks to run as a task (`params.task`,
//! 2025-11-25) gets one at once, and `tasks/get` and `tasks/result` for it likewise.
//!
//! ```
//! use std::time::Duration;
//! use tower_idempotency::IdempotencyLayer;
//!
//! let layer = IdempotencyLayer::new()
//!     .deadline(Duration::from_secs(20))
//!     .mcp()
//!     .deadline_for_tool("generate_report", Duration::from_secs(2))
//!     .pass_through_tool("search");
//! // axum::Router::new().nest_service("/mcp", layer.layer(rmcp_streamable_http_service))
//! # let _ = layer;
//! ```

// The middleware's public face: its builder and its service.
mod layer;
mod service;

// The MCP dialect: a Streamable HTTP endpoint's JSON-RPC messages read (the era, the envelope,
// the tool's answer on a body or an event stream) and the engine's outcomes told as JSON-RPC
// results, tasks and refusals.
mod answers;
#[cfg(feature = "contract")]
mod arguments;
mod call;
pub(crate) mod cancellation;
mod dialect;
mod discovery;
pub(crate) mod endpoint;
mod envelope;
mod era;
#[cfg(fuzzing)]
pub(crate) mod fuzzing;
#[cfg(feature = "contract")]
mod input_schema;
mod judge;
mod list_changed;
mod listing;
mod live;
mod message;
pub(crate) mod observe;
mod param_headers;
mod plain_call;
pub(crate) mod policy;
pub(crate) mod post;
mod progress;
pub(crate) mod relay;
mod render;
mod resume;
mod schema_lookup;
mod task_extension;
mod task_query;
mod tasks;
mod tool;

pub use layer::McpIdempotencyLayer;
pub use service::McpIdempotency;

/// The header that names an MCP session.
pub const MCP_SESSION_HEADER: &str = "mcp-session-id";

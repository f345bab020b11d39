//! The MCP mode: protects the tools of a Model Context Protocol server served over
//! Streamable HTTP (one `POST /mcp` endpoint, JSON-RPC 2.0 bodies).
//!
//! [`IdempotencyLayer::mcp`](crate::IdempotencyLayer::mcp) turns a configured layer into an [`McpIdempotencyLayer`]. For a
//! `tools/call`:
//!
//! - **the key** is the scope and the canonical JSON of the request without its `id`,
//!   `params._meta` and `params.task`: the tool's name and its arguments. A retry with a new
//!   JSON-RPC id, or with a new progress token, is the same intent; two sessions never share
//!   one. The scope is the `Mcp-Session-Id` session; where the layer was given a principal
//!   ([`IdempotencyLayer::scope_header`](crate::IdempotencyLayer::scope_header), [`IdempotencyLayer::scope_fn`](crate::IdempotencyLayer::scope_fn)) that principal is
//!   required and the session only narrows it, so a session id that a client chooses can
//!   never reach another principal's results ([`McpIdempotencyLayer::scope_by_principal`] leaves the
//!   session out);
//! - **cancellations stay with the layer**: a client's `notifications/cancelled` for a
//!   protected call is answered (202) and not passed on, so the execution goes on for every
//!   caller waiting on it and its retry gets the result; only a request this instance
//!   forwarded unprotected in that session is the server's to cancel. A client that closes
//!   its stream cannot stop the execution either: it runs detached;
//! - **answers carry the caller's id**: the kept JSON-RPC response is replayed with the id of
//!   the request it answers, as `application/json` or, for a client that accepts only that,
//!   as an SSE stream of one event. An SSE answer from the server is kept as its final
//!   JSON-RPC response (progress notifications before it are not replayed);
//! - **kept or released**: a result is kept, `isError: true` included, since it is the tool's
//!   own answer; so are the deterministic JSON-RPC refusals (-32600 invalid request, -32601
//!   unknown method, -32602 invalid params) and every code outside JSON-RPC's reserved range
//!   (-32768 to -32000). Every other reserved code (-32603 internal error, -32700, the
//!   -32000 to -32099 server errors), an HTTP error from the server (an unknown session) and
//!   an answer that never came release the key, so that a retry runs. The layer's
//!   [`classify`](crate::IdempotencyLayer::classify) rule does not apply in this mode;
//! - **in progress**: past its deadline, a call is answered with a `CallToolResult` whose text
//!   says that the action is already running and must not be repeated with new arguments,
//!   and whose `structuredContent` holds `outcome: "in_progress"`, `retry_after_s` and the
//!   `intent`. Calling again with the same arguments later gets the real result. It is not
//!   an error (`isError: false`) for a tool that a `tools/list` answer passing through the
//!   layer listed without an `outputSchema`; otherwise it is marked `isError: true`, since a
//!   result that is not an error must match the tool's output schema, and clients check it
//!   (the official Python SDK's client raises on one that does not). Every other
//!   answer the layer writes (not executed, failed) is a `CallToolResult` with
//!   `isError: true` whose text says first what happened and whether calling again is safe;
//! - **read-only tools pass through**: a tool that a `tools/list` answer passing through the
//!   layer annotates `readOnlyHint: true` is not protected, unless the configuration says
//!   otherwise ([`McpIdempotencyLayer::protect_tool`], [`McpIdempotencyLayer::pass_through_tool`]).
//!
//! Every other message (`initialize`, `tools/list`, notifications, `ping`, responses, the
//! `GET` stream and `DELETE`) passes through untouched. A batch that holds a `tools/call`, a
//! `tools/call` without an id or without `params.name` is refused with a JSON-RPC error,
//! nothing executed.
//!
//! Tools that ask the client something in the middle of a call (sampling, elicitation) need
//! the server's stream to reach the client: pass them through.
//!
//! With [`McpIdempotencyLayer::tasks`], a call that asks to run as an MCP task gets a task at once, and
//! the layer answers `tasks/get` and `tasks/result` for it from the store.
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

mod answers;
mod call;
mod cancellation;
mod discovery;
mod endpoint;
mod envelope;
mod era;
mod layer;
mod message;
mod policy;
mod render;
mod resume;
mod service;
mod task_extension;
mod task_query;
mod tasks;
mod tool;

pub use layer::McpIdempotencyLayer;
pub use service::McpIdempotency;

/// The header that names an MCP session.
pub const MCP_SESSION_HEADER: &str = "mcp-session-id";

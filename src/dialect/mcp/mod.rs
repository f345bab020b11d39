//! The MCP dialect: a Streamable HTTP endpoint's JSON-RPC messages read (the era, the
//! envelope, the tool's answer on a body or an event stream) and the engine's outcomes told
//! as JSON-RPC results, tasks and refusals. Its public face, the builder and the service,
//! lives in the `mcp` module.

mod answers;
mod call;
pub(crate) mod cancellation;
mod discovery;
pub(crate) mod endpoint;
mod envelope;
mod era;
mod judge;
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

/// The header that names an MCP session.
pub const MCP_SESSION_HEADER: &str = "mcp-session-id";

//! The protocols the engine's outcomes are told in, and the one protected path they share.
//! Each reads the request's scope and operation and the tool's answer for the engine (whether
//! the action happened, what to keep), and renders what the engine decided in its own terms.

mod drive;

pub(crate) use drive::{protect, Answer, Dialect, Payload};
// What a protocol that answers while its execution runs (MCP's event streams) finishes with.
#[cfg(feature = "mcp")]
pub(crate) use drive::{finish, Telling};

use ::http::{Request, Response};
use tower_service::Service;

/// A service whose calls can run detached: sendable, with a sendable future and error.
pub(crate) trait Tool<B, ResBody>:
    Service<Request<B>, Response = Response<ResBody>, Future: Send + 'static, Error: Send + 'static>
    + Send
    + 'static
{
}

impl<T, B, ResBody> Tool<B, ResBody> for T
where
    T: Service<Request<B>, Response = Response<ResBody>> + Send + 'static,
    T::Future: Send + 'static,
    T::Error: Send + 'static,
{
}

//! The HTTP middleware: [`IdempotencyLayer`], the [`Idempotency`] service it builds and their
//! [`ResponseFuture`]; the HTTP dialect that reads the tool's response for the engine and
//! renders the engine's outcome as a response (the tool's own, a replay, or the layer's JSON
//! with its status code), the status path included.

mod answer;
mod future;
mod layer;
mod observe;
mod protect;
mod read;
mod render;
mod replay;
mod request_id_settings;
mod retry_settings;
mod route;
mod scope_settings;
mod service;
mod status;
#[cfg(feature = "postgres")]
mod transactional;

#[cfg(feature = "contract")]
pub(crate) use answer::written;
pub use future::ResponseFuture;
pub use layer::IdempotencyLayer;
#[cfg(any(feature = "mcp", feature = "contract"))]
pub(crate) use render::refused;
#[cfg(feature = "mcp")]
pub(crate) use route::{route, Route};
pub use service::Idempotency;
#[cfg(feature = "mcp")]
pub(crate) use status::respond;

//! The HTTP dialect: reads the tool's response for the engine, and renders the engine's
//! outcome as a response (the tool's own, a replay, or the layer's JSON with its status code),
//! the status path included.

mod answer;
mod observe;
mod protect;
mod read;
mod render;
mod replay;
mod status;

#[cfg(feature = "contract")]
pub(crate) use answer::written;
pub(crate) use observe::observe;
pub(crate) use protect::protect;
#[cfg(any(feature = "mcp", feature = "contract"))]
pub(crate) use render::refused;
pub(crate) use status::{asks_status, respond};

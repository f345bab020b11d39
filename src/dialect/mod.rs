//! The protocols the engine's outcomes are told in. Each reads the tool's answer for the
//! engine (whether the action happened, what to keep) and renders what the engine decided in
//! its own terms; the MCP dialect lives in the `mcp` module, beside its public builder.

pub(crate) mod http;

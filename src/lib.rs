#![forbid(unsafe_code)]
#![deny(unreachable_pub)]
#![warn(missing_docs, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! Tower middleware that makes HTTP tool APIs safe to call more than once.
//!
//! Agents retry: the client times out while the tool still runs, the model reads "error" and
//! calls again, or it issues the same call twice in one turn. [`IdempotencyLayer`] makes those
//! repeats harmless without the client's help. It derives an *intent key* from the caller's
//! scope, the operation and the canonical JSON (RFC 8785) of the body; the first call runs,
//! concurrent duplicates wait for it and get its response, later ones get it replayed, a real
//! failure releases the key for a retry, and a caller past its deadline gets 202 "in progress"
//! with a status URL while the action goes on. Every answer the layer writes says first what
//! happened to the action and whether calling again is safe.
//!
//! Two requests an upstream could tell apart are never one intent: integers keep their exact
//! digits, an integer and a number written with a fraction or an exponent (`1`, `1.0`) are two
//! kinds ([`IdempotencyLayer::rfc8785_numbers`] merges them), and the media type counts. A
//! header the client chooses only ever narrows a configured scope
//! ([`IdempotencyLayer::narrow_scope_by`]), never replaces it.
//!
//! ```
//! use axum::{routing::post, Json, Router};
//! use serde_json::{json, Value};
//! use tower_idempotency::IdempotencyLayer;
//!
//! async fn send_email(Json(_email): Json<Value>) -> Json<Value> {
//!     Json(json!({ "status": "sent" }))
//! }
//!
//! let app: Router = Router::new()
//!     .route("/tools/send_email", post(send_email))
//!     .layer(
//!         IdempotencyLayer::new()
//!             .ignore_field("/tool_call_id")
//!             .idempotency_key_header(),
//!     );
//! ```
//!
#![cfg_attr(
    feature = "mcp",
    doc = "In front of an MCP server (Streamable HTTP), [`IdempotencyLayer::mcp`] (feature \
           `mcp`) keys `tools/call` requests by session, tool and arguments and answers in \
           JSON-RPC terms; see [`mcp`].\n"
)]
// Without the feature there is nothing to link to: the same sentence, unlinked.
#![cfg_attr(
    not(feature = "mcp"),
    doc = "In front of an MCP server (Streamable HTTP), `IdempotencyLayer::mcp` (feature `mcp`) \
           keys `tools/call` requests by session, tool and arguments and answers in JSON-RPC \
           terms; see the `mcp` module.\n"
)]
//!
//! The same layer stacks in a `tower::ServiceBuilder` and under plain hyper (wrap the
//! incoming body in [`RequestBody`]). Outcomes live in a [`store::Store`]: the in-process
//! [`store::MemoryStore`] by default.

pub mod admin;
mod body;
pub mod canonical;
mod classify;
mod clock;
#[cfg(feature = "contract")]
#[cfg_attr(docsrs, doc(cfg(feature = "contract")))]
pub mod contract;
mod dialect;
mod engine;
// The fuzz targets' entry points (`fuzz/`), built only with `--cfg fuzzing`, which `cargo
// fuzz` sets: a user's build never has them.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod headers;
mod idempotency;
pub mod key;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;
pub mod reference;
mod scope;
mod service_parts;
mod settings;
pub mod store;
mod telemetry;
mod user_code;
mod wording;

pub use body::{RequestBody, ResponseBody};
pub use classify::{Classify, DefaultClassify, Interrupted, Verdict};
pub use engine::DetachedExecutions;
pub use headers::{DEFAULT_REQUEST_ID_HEADER, INTENT_HEADER, REPLAYED_HEADER};
pub use idempotency::{Idempotency, IdempotencyLayer, ResponseFuture};
pub use key::IntentKey;
pub use scope::DEFAULT_SCOPE_HEADER;
pub use settings::{RetryBudget, DEFAULT_STATUS_PATH};
pub use store::ReleaseCause;
pub use telemetry::{
    DuplicateCounts, DuplicateReport, Duplicates, OperationDuplicates, RepeatingCaller,
    ATTEMPT_BUCKETS, DURATION_BUCKETS, MAX_OPERATIONS,
};

/// The README's code blocks, compiled as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The code blocks of the pages in `docs/`, compiled as doc tests, as the README's are.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../docs/compatibility.md")]
    struct Compatibility;
    #[doc = include_str!("../docs/guarantees.md")]
    struct Guarantees;
    #[doc = include_str!("../docs/handling.md")]
    struct Handling;
    #[doc = include_str!("../docs/mcp.md")]
    struct Mcp;
    #[doc = include_str!("../docs/observability.md")]
    struct Observability;
    #[doc = include_str!("../docs/outcomes.md")]
    struct Outcomes;
    #[doc = include_str!("../docs/production.md")]
    struct Production;
    #[doc = include_str!("../docs/settings.md")]
    struct Settings;
    #[doc = include_str!("../docs/stores.md")]
    struct Stores;
}

//! Versioned JSON Schemas per operation, checked before a request reaches the idempotency
//! store or the tool.
//!
//! A request whose arguments break the schema gets 422 with `outcome: "invalid"`, a small
//! `reason` code, `retryable: false` and a `detail` naming the field and what is wrong; it never
//! runs and never claims an intent. Stack the layer outside [`IdempotencyLayer`] so that bad
//! input is refused before it is fingerprinted:
//!
//! ```
//! use axum::{routing::post, Router};
//! use http::Method;
//! use serde_json::json;
//! use tower::ServiceBuilder;
//! use tower_idempotency::contract::ContractLayer;
//! use tower_idempotency::IdempotencyLayer;
//!
//! let contracts = ContractLayer::new()
//!     .operation(
//!         Method::POST,
//!         "/tools/send_email",
//!         "send_email/v1",
//!         &json!({
//!             "type": "object",
//!             "required": ["to", "subject"],
//!             "properties": {
//!                 "to": { "type": "string", "format": "email" },
//!                 "subject": { "type": "string" }
//!             }
//!         }),
//!     )
//!     .expect("a valid schema");
//!
//! let app: Router = Router::new()
//!     .route("/tools/send_email", post(|| async { "sent" }))
//!     .layer(ServiceBuilder::new().layer(contracts).layer(IdempotencyLayer::new()));
//! ```
//!
//! [`IdempotencyLayer`]: crate::IdempotencyLayer

mod layer;
mod schemas;
mod service;
mod violation;

pub use crate::idempotency::ResponseFuture;
pub use layer::{ContractLayer, InvalidSchema};
pub use service::Contract;
#[cfg(feature = "mcp")]
pub(crate) use violation::Violation;

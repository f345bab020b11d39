#![deny(unsafe_code, unreachable_pub)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! tower-idempotency

pub mod canonical;
pub mod key;
pub mod store;

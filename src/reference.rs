//! The reference: every setting, outcome and guarantee, with the tests that hold them.
//!
//! Each page is one topic; the same pages are the markdown files under `docs/` in the
//! repository.
//!
//! - [`handling`]: how a request is handled, step by step, and where the layer goes in a stack.
//! - [`settings`]: every builder method and store setting, with its default.
//! - [`outcomes`]: what callers get in each situation, and which outcomes are kept or
//!   released.
//! - [`stores`]: the memory store, Redis and Redis Cluster (over TLS too), and a store of your
//!   own.
//! - [`mcp`]: protecting an MCP server: eras, key and scope, what is kept and told, tasks, the
//!   example and the SDKs it is tested with.
//! - [`observability`]: metrics, panels, spans and logs, and the contract layer.
//! - [`production`]: a production setup step by step, shutdown and store faults, sizing and
//!   alerts.
//! - [`guarantees`]: every promise beside the tests that hold it, and what is not promised.
//! - [`compatibility`]: keys, records, Redis, Rust, HTTP stacks and MCP versions.

// The pages link to each other by reference labels whose definitions at the foot of each file
// name the markdown files; these come first, so that rustdoc takes them instead.
macro_rules! page_links {
    () => {
        "[handling]: crate::reference::handling\n\
         [settings]: crate::reference::settings\n\
         [outcomes]: crate::reference::outcomes\n\
         [stores]: crate::reference::stores\n\
         [mcp]: crate::reference::mcp\n\
         [observability]: crate::reference::observability\n\
         [production]: crate::reference::production\n\
         [guarantees]: crate::reference::guarantees\n\
         [compatibility]: crate::reference::compatibility\n"
    };
}

#[doc = page_links!()]
#[doc = include_str!("../docs/handling.md")]
pub mod handling {}

#[doc = page_links!()]
#[doc = include_str!("../docs/settings.md")]
pub mod settings {}

#[doc = page_links!()]
#[doc = include_str!("../docs/outcomes.md")]
pub mod outcomes {}

#[doc = page_links!()]
#[doc = include_str!("../docs/stores.md")]
pub mod stores {}

#[doc = page_links!()]
#[doc = include_str!("../docs/mcp.md")]
pub mod mcp {}

#[doc = page_links!()]
#[doc = include_str!("../docs/observability.md")]
pub mod observability {}

#[doc = page_links!()]
#[doc = include_str!("../docs/production.md")]
pub mod production {}

#[doc = page_links!()]
#[doc = include_str!("../docs/guarantees.md")]
pub mod guarantees {}

#[doc = page_links!()]
#[doc = include_str!("../docs/compatibility.md")]
pub mod compatibility {}

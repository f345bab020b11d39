//! The MCP dialect of the protected path, as one `tools/call` holds it: what it is rendered
//! with, and what relaying it takes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::endpoint::Endpoint;
use super::envelope::ToolCall;
use super::era::Era;
use super::listing::Server;
use super::message::Form;
use super::relay::Outlet;
use super::render::Rendering;
use crate::engine::relay::Attachment;
use crate::headers::RequestId;
use crate::settings::Timing;

/// The MCP dialect of the protected path, for one `tools/call`.
pub(crate) struct McpCall<St> {
    pub(crate) endpoint: Arc<Endpoint<St>>,
    pub(crate) call: ToolCall,
    /// The server the call is for.
    pub(crate) server: Server,
    /// The era the answer goes to.
    pub(crate) era: Era,
    /// The form the caller accepts.
    pub(crate) form: Form,
    /// The call asked to run as a task (2025-11-25), and tasks are served.
    pub(super) as_task: bool,
    /// The client takes a task (the tasks extension), and tasks are served: a call still
    /// running at its deadline is answered with one.
    pub(crate) offers_task: bool,
    /// How long the call's outcome is kept: a task's time to live.
    pub(crate) retention: Duration,
    pub(super) timing: Timing,
    /// Where what the server says mid-call goes, once the call is relayed.
    /// Taken by the call's work, which the driver asks for through a shared borrow.
    pub(super) outlet: std::sync::Mutex<Option<Outlet>>,
    /// For a caller that takes an event stream: where its attachment comes back, with the
    /// call's slot for its cancellation.
    pub(super) attached: Option<(oneshot::Receiver<Attachment>, u128)>,
    /// The request's id, which the layer's own results carry in `_meta`.
    pub(super) request_id: Option<RequestId>,
}

impl<St> McpCall<St> {
    /// What the call's outcome is rendered with, in `form`.
    pub(crate) fn rendering(&self, form: Form) -> Rendering<'_, St> {
        Rendering {
            endpoint: &self.endpoint,
            call: &self.call,
            server: self.server,
            era: self.era,
            form,
            as_task: self.as_task,
            offers_task: self.offers_task,
            retention: self.retention,
            request_id: self.request_id.as_ref(),
        }
    }
}

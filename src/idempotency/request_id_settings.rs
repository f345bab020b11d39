//! The layer's setter of what the answers it writes itself say of their request: its id.

use http::HeaderName;

use super::IdempotencyLayer;

impl<St> IdempotencyLayer<St> {
    /// Names the header that carries a request's id (default `x-request-id`, as tower-http's
    /// `SetRequestIdLayer` sets it). Every answer the layer writes itself (a refusal, an
    /// in-progress answer, the status path's words; in MCP, its tool results' `_meta`) then
    /// says `request_id`, where the request carried one short value of visible ASCII. A
    /// replay's body stays the tool's, and no kept response keeps this header: a replay
    /// answers a new request, whose own id a request-id layer outside gives back.
    pub fn request_id_header(self, name: HeaderName) -> Self {
        self.set(|s| s.request_id_header = name)
    }
}

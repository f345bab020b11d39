//! The mark of an answer that stands in for one that was lost.

/// Put in a response's extensions by an inner service whose call to the tool broke off after
/// the request was sent (a proxy whose upstream reset the connection or timed out): the action
/// may have run, and this response is not its answer.
///
/// The layer records such an answer as executed with an unknown outcome, whatever its
/// status: it is never released into a retry that would run the action again, and repeats
/// are told to check its effect first. Its first caller is given the response as it is.
///
/// ```
/// use http::{Response, StatusCode};
/// use tower_idempotency::Interrupted;
///
/// let mut response = Response::new("the upstream reset the connection");
/// *response.status_mut() = StatusCode::BAD_GATEWAY;
/// response.extensions_mut().insert(Interrupted);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interrupted;

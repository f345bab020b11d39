//! The mark of an answer that stands in for one that was lost.

/// The mark of an answer lost after the request reached the tool, put by an inner service
/// that calls the tool (a proxy whose upstream reset the connection or timed out): the action
/// may have run.
///
/// - In a response's extensions, it says that this response stands in for the lost answer.
///   The layer records it as executed with an unknown outcome, whatever its status, and its
///   first caller is given the response as it is.
/// - As the error of a response body, it says that the answer broke off after it began. The
///   layer records the same, and its first caller is told that the action may have run.
///
/// Either way the call is never released into a retry that would run the action again, and
/// repeats are told to check its effect first.
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

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the answer was lost after the request reached the tool")
    }
}

impl std::error::Error for Interrupted {}

/// Whether a body's error is an [`Interrupted`], or was caused by one (a body type that
/// wraps its stream's errors keeps them as its error's source).
pub(crate) fn is_interrupted(error: &crate::body::BoxError) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error.as_ref());
    while let Some(error) = next {
        if error.is::<Interrupted>() {
            return true;
        }
        next = error.source();
    }
    false
}

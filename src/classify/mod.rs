//! Which outcomes are kept for replay and which release the key for a retry.

mod interrupted;

pub(crate) use interrupted::is_interrupted;
pub use interrupted::Interrupted;

use http::{header, HeaderMap, StatusCode};

use crate::store::ReleaseCause;

/// What to do with an execution's response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The action happened: keep the response and replay it to every repeat.
    Keep,
    /// The action happened, but its response must not be kept (`cache-control: no-store`):
    /// keep that it ran and its status; repeats are told it already ran.
    KeepStatus,
    /// The action failed for real: release the key so that a retry runs.
    Release(ReleaseCause),
    /// The action was executed, but its outcome is not known: its answer came but says
    /// nothing of the effect (the layer gives this verdict when a classification rule panics;
    /// a rule of yours may give it to an answer that only says the call reached the tool).
    /// Keep that it ran; repeats are told to check before they call again, and it never runs
    /// again by itself.
    Unknown,
}

/// Decides, from the status and headers of a response, whether its action happened.
///
/// Implemented for closures, so a custom rule is one line:
///
/// ```
/// use http::StatusCode;
/// use tower_idempotency::{IdempotencyLayer, ReleaseCause, Verdict};
///
/// // Also retry 409s, which this API uses for "try again".
/// let layer = IdempotencyLayer::new().classify(|status: StatusCode, headers: &http::HeaderMap| {
///     if status == StatusCode::CONFLICT {
///         Verdict::Release(ReleaseCause::Predicate)
///     } else {
///         tower_idempotency::DefaultClassify::verdict(status, headers)
///     }
/// });
/// ```
pub trait Classify: Send + Sync + 'static {
    /// The verdict on one response.
    fn classify(&self, status: StatusCode, headers: &HeaderMap) -> Verdict;
}

impl<F> Classify for F
where
    F: Fn(StatusCode, &HeaderMap) -> Verdict + Send + Sync + 'static,
{
    fn classify(&self, status: StatusCode, headers: &HeaderMap) -> Verdict {
        self(status, headers)
    }
}

/// The default rule: keep 2xx, 3xx and 4xx; release 5xx, 408, 425 and 429 (the tool failed or
/// asks for a retry) and 401, 403, 407, 412 and 428 (the answer of the credentials or the
/// preconditions, not the tool's to its arguments: a retry with a fresh token must run); a 502
/// or 504 (a gateway in front of the tool lost it or gave up waiting) is an outcome not known:
/// the tool may have run, or still run. A response marked `cache-control: no-store` is not
/// kept: a 2xx or 3xx is recorded as run without its response (its action happened), anything
/// else releases the key. The answers of another idempotency layer inside this one (they
/// carry `idempotency-intent` and `no-store`) say nothing of an outcome, so they release it
/// too.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClassify;

impl DefaultClassify {
    /// The default verdict, for custom rules that refine it.
    pub fn verdict(status: StatusCode, headers: &HeaderMap) -> Verdict {
        match status.as_u16() {
            502 | 504 => return Verdict::Unknown,
            401 | 403 | 407 | 412 | 428 => return Verdict::Release(ReleaseCause::Credentials),
            _ => {}
        }
        let transient = status.is_server_error()
            || matches!(status.as_u16(), 408 | 425 | 429)
            || status.is_informational();
        if transient {
            return Verdict::Release(ReleaseCause::Status);
        }
        let no_store = headers
            .get_all(header::CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|directive| directive.trim().eq_ignore_ascii_case("no-store"));
        if !no_store {
            return Verdict::Keep;
        }
        if status.is_client_error() || headers.contains_key(&crate::headers::INTENT) {
            Verdict::Release(ReleaseCause::NoStore)
        } else {
            Verdict::KeepStatus
        }
    }
}

impl Classify for DefaultClassify {
    fn classify(&self, status: StatusCode, headers: &HeaderMap) -> Verdict {
        Self::verdict(status, headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn the_default_rule_keeps_what_happened_and_releases_what_did_not() {
        let empty = HeaderMap::new();
        for kept in [200, 201, 204, 302, 400, 404, 409, 422] {
            let status = StatusCode::from_u16(kept).unwrap();
            assert_eq!(
                DefaultClassify::verdict(status, &empty),
                Verdict::Keep,
                "{kept}"
            );
        }
        for released in [408, 425, 429, 500, 503] {
            let status = StatusCode::from_u16(released).unwrap();
            assert_eq!(
                DefaultClassify::verdict(status, &empty),
                Verdict::Release(ReleaseCause::Status),
                "{released}"
            );
        }
        for credentials in [401, 403, 407, 412, 428] {
            let status = StatusCode::from_u16(credentials).unwrap();
            assert_eq!(
                DefaultClassify::verdict(status, &empty),
                Verdict::Release(ReleaseCause::Credentials),
                "{credentials}"
            );
        }
        for gateway in [502, 504] {
            let status = StatusCode::from_u16(gateway).unwrap();
            assert_eq!(DefaultClassify::verdict(status, &empty), Verdict::Unknown);
        }
        let mut no_store = HeaderMap::new();
        no_store.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, No-Store"),
        );
        assert_eq!(
            DefaultClassify::verdict(StatusCode::OK, &no_store),
            Verdict::KeepStatus,
            "it ran: recorded without its response"
        );
        assert_eq!(
            DefaultClassify::verdict(StatusCode::BAD_REQUEST, &no_store),
            Verdict::Release(ReleaseCause::NoStore)
        );
        no_store.insert(
            crate::headers::INTENT_HEADER,
            HeaderValue::from_static("ab"),
        );
        assert_eq!(
            DefaultClassify::verdict(StatusCode::ACCEPTED, &no_store),
            Verdict::Release(ReleaseCause::NoStore),
            "an inner layer's in-progress answer is no outcome"
        );
    }
}

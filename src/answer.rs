//! The responses the layer writes itself.
//!
//! Each is JSON with `outcome`, `retryable` and a `detail` whose first sentence says what
//! happened to the action, since a model reads it to decide whether to call again. Errors are
//! `application/problem+json` (RFC 9457) with those members as extensions.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::key::IntentKey;
use crate::store::{Omission, ReleaseCause, Tombstone};

/// The header that carries the intent key on every protected response.
pub const INTENT_HEADER: &str = "idempotency-intent";
/// The header set on replayed responses.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// A response the layer writes.
#[derive(Debug)]
pub(crate) struct Answer {
    status: StatusCode,
    /// A short name of the situation, for metrics.
    slug: &'static str,
    /// Members in the order they are written: the problem members, then what happened.
    members: Vec<(&'static str, Value)>,
    retry_after_s: Option<u64>,
    location: Option<String>,
}

impl Answer {
    fn new(
        status: StatusCode,
        slug: &'static str,
        title: &str,
        outcome: &str,
        retryable: bool,
        detail: String,
    ) -> Self {
        let mut members = Vec::with_capacity(10);
        if status.is_client_error() || status.is_server_error() {
            members.push(("type", format!("urn:tower-idempotency:{slug}").into()));
            members.push(("title", title.into()));
            members.push(("status", status.as_u16().into()));
        }
        members.push(("outcome", outcome.into()));
        members.push(("retryable", retryable.into()));
        members.push(("detail", detail.into()));
        Self {
            status,
            slug,
            members,
            retry_after_s: None,
            location: None,
        }
    }

    fn member(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.members.push((name, value.into()));
        self
    }

    fn intent(self, key: &IntentKey) -> Self {
        self.member("intent", key.to_hex())
    }

    fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self.member("retry_after_s", seconds)
    }

    /// A short name of the situation (`missing-scope`, `too-busy`...), for metrics.
    pub(crate) fn reason(&self) -> &'static str {
        self.slug
    }

    /// The HTTP status of this answer.
    #[cfg(test)]
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    pub(crate) fn into_response(self) -> Response<Bytes> {
        let is_problem = self.status.is_client_error() || self.status.is_server_error();
        // Written by hand rather than through a `Map`, which would sort the members: the
        // outcome and the detail sentence should come first for a reader.
        let mut text = String::with_capacity(512);
        text.push('{');
        for (i, (name, value)) in self.members.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&Value::from(*name).to_string());
            text.push(':');
            text.push_str(&value.to_string());
        }
        text.push('}');
        let body = Bytes::from(text);
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(if is_problem {
                "application/problem+json"
            } else {
                "application/json"
            }),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(seconds) = self.retry_after_s {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(location) = self.location.and_then(|l| HeaderValue::try_from(l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        response
    }
}

/// A JSON body has fields to leave out of its key but no canonical form to find them in.
pub(crate) fn unkeyable(why: &crate::canonical::CanonicalError) -> Answer {
    Answer::new(
        StatusCode::BAD_REQUEST,
        "unkeyable",
        "Body cannot be keyed",
        "not_executed",
        false,
        format!(
            "The action was not executed: the request body cannot be recognised when it is \
             repeated ({why}). Send it as plain JSON, with each member named once."
        ),
    )
    .member("reason", why.to_string())
}

/// A hook of the user's (a scope function, a normalisation hook) panicked on this request
/// before anything was claimed.
pub(crate) fn layer_fault(what: &str) -> Answer {
    Answer::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "layer-fault",
        "Idempotency hook failed",
        "not_executed",
        false,
        format!(
            "The action was not executed: the layer's `{what}` hook failed on this request, so \
             it could not be protected. The same call will fail the same way until the hook is \
             fixed."
        ),
    )
}

/// The status path: the user's scope hook panicked, so the record cannot be looked up.
pub(crate) fn status_layer_fault(what: &str) -> Answer {
    Answer::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "layer-fault",
        "Idempotency hook failed",
        "unavailable",
        false,
        format!(
            "This status request was not answered: the layer's `{what}` hook failed on it, so \
             whether the action ran cannot be told from here."
        ),
    )
}

/// A protected request came without a scope.
pub(crate) fn missing_scope(what: &str) -> Answer {
    Answer::new(
        StatusCode::BAD_REQUEST,
        "missing-scope",
        "Missing session scope",
        "not_executed",
        false,
        format!(
            "The action was not executed: this endpoint needs {what} to recognise repeated \
             calls. Send the call again with it set."
        ),
    )
}

/// The request body is over the limit.
pub(crate) fn body_too_large(limit: usize) -> Answer {
    Answer::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body-too-large",
        "Request body too large",
        "not_executed",
        false,
        format!(
            "The action was not executed: the request body is larger than the {limit}-byte \
             limit. Repeating the same call will be refused again; send a smaller body."
        ),
    )
    .member("limit_bytes", limit)
}

/// The request body could not be read.
pub(crate) fn body_unreadable() -> Answer {
    Answer::new(
        StatusCode::BAD_REQUEST,
        "body-unreadable",
        "Request body could not be read",
        "not_executed",
        true,
        "The action was not executed: the request body could not be read to the end. It is \
         safe to send the same call again."
            .to_owned(),
    )
}

/// The explicit key is not 1 to 255 visible ASCII characters.
pub(crate) fn malformed_key(source: &str) -> Answer {
    Answer::new(
        StatusCode::BAD_REQUEST,
        "malformed-key",
        "Malformed idempotency key",
        "not_executed",
        false,
        format!(
            "The action was not executed: the idempotency key in {source} must be 1 to 255 \
             visible ASCII characters. Send the call again with a valid key."
        ),
    )
}

/// An explicit key was reused with another payload: the action under it ran (or runs).
pub(crate) fn key_reused(key: &IntentKey, running: bool) -> Answer {
    let state = if running {
        "is already running"
    } else {
        "already ran"
    };
    Answer::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "key-reused",
        "Idempotency key reused with a different payload",
        "not_executed",
        false,
        format!(
            "This call was not executed: an action under this idempotency key {state}, with \
             other arguments, and these arguments were not used. A retry of that action must \
             resend its original arguments with this key to get its result."
        ),
    )
    .intent(key)
}

/// The store could not answer a claim, and the layer fails closed.
pub(crate) fn store_unavailable(key: &IntentKey) -> Answer {
    Answer::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store-unavailable",
        "Idempotency store unavailable",
        "not_executed",
        true,
        "The action was not executed: the idempotency store could not be reached, so the call \
         could not be protected against running twice. It is safe to call again with the same \
         arguments in 1 s."
            .to_owned(),
    )
    .intent(key)
    .retry_after(1)
}

/// Too many detached executions are running.
pub(crate) fn too_busy(key: &IntentKey) -> Answer {
    Answer::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too-busy",
        "Too many actions running",
        "not_executed",
        true,
        "The action was not executed: too many actions are already running on this server. It \
         is safe to call again with the same arguments in 1 s."
            .to_owned(),
    )
    .intent(key)
    .retry_after(1)
}

/// The action is still running at the caller's deadline. `keeps` names what a repeat must
/// send again besides the arguments (the scope header, the idempotency key).
pub(crate) fn in_progress(
    key: &IntentKey,
    status_url: &str,
    started_s_ago: u64,
    conflict: bool,
    keeps: &str,
) -> Answer {
    let retry_after = started_s_ago.div_ceil(2).clamp(1, 30);
    let detail = format!(
        "This action is already running (started {started_s_ago} s ago) and was not started \
         again. Do not repeat it with new arguments: call again with the same arguments, \
         keeping {keeps}, in {retry_after} s, or GET {status_url} (keeping the same) for its \
         result."
    );
    let answer = if conflict {
        Answer::new(
            StatusCode::CONFLICT,
            "in-progress",
            "Action already in progress",
            "in_progress",
            true,
            detail,
        )
    } else {
        Answer::new(StatusCode::ACCEPTED, "", "", "in_progress", true, detail)
    };
    let mut answer = answer
        .intent(key)
        .member("status_url", status_url)
        .member("started_s_ago", started_s_ago)
        .retry_after(retry_after);
    answer.location = Some(status_url.to_owned());
    answer
}

/// The action ran, but its outcome could not be classified: whether it took effect is not
/// known.
fn outcome_unknown(key: &IntentKey, status: StatusCode) -> Answer {
    Answer::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "outcome-unknown",
        "Outcome unknown",
        "unknown",
        false,
        format!(
            "This action ran (it answered status {}), but its outcome could not be \
             classified, so whether it took effect is not known. It was not run again: check \
             its effect before calling again.",
            status.as_u16()
        ),
    )
    .intent(key)
    .member("last_status", status.as_u16())
}

/// The execution was abandoned at its bound: the action may have happened.
pub(crate) fn abandoned(key: &IntentKey) -> Answer {
    Answer::new(
        StatusCode::GATEWAY_TIMEOUT,
        "abandoned",
        "Action abandoned",
        "unknown",
        false,
        "This action may have run: it was still running at its time limit and was abandoned, \
         so whether it took effect is not known. It will not be run again by itself: check its \
         effect before calling again."
            .to_owned(),
    )
    .intent(key)
}

/// The action ran, but its response was not kept.
pub(crate) fn already_executed(key: &IntentKey, status: StatusCode, why: Omission) -> Answer {
    let why = match why {
        Omission::TooLarge => "was too large to keep",
        Omission::NoStore => "was marked `cache-control: no-store`, so it was not kept",
        Omission::Unclassified => return outcome_unknown(key, status),
    };
    Answer::new(
        status,
        "already-executed",
        "Action already executed",
        "already_executed",
        false,
        format!(
            "This action already ran (it answered status {}) and was not run again; its \
             response {why}, so it cannot be shown here. Do not call it again expecting it to \
             run.",
            status.as_u16()
        ),
    )
    .intent(key)
}

/// How an attempt ended without a kept outcome, for the answers about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It answered with this status, which released the key; with the wait it asked for.
    Status(StatusCode, Option<u64>),
    /// The tool returned an error instead of a response.
    Error,
    /// The tool panicked, or its execution stopped before it reported an outcome: it may
    /// have run.
    Panic,
    /// Its response body broke off after its status was sent: it may have run.
    Body,
}

impl Failure {
    /// How the attempt a tombstone records ended.
    pub(crate) fn of(tombstone: &Tombstone) -> Self {
        Self::released(tombstone.status, tombstone.cause, tombstone.retry_after_s)
    }

    /// How an attempt released for `cause` ended: a crash or an answer that broke off may
    /// have run, whatever status came before it.
    pub(crate) fn released(
        status: Option<StatusCode>,
        cause: ReleaseCause,
        retry_after_s: Option<u64>,
    ) -> Self {
        match (status, cause) {
            (_, ReleaseCause::Panic) => Self::Panic,
            (_, ReleaseCause::ResponseBody) => Self::Body,
            (Some(status), _) => Self::Status(status, retry_after_s),
            (None, _) => Self::Error,
        }
    }

    fn last_status(self) -> Value {
        match self {
            Self::Status(status, _) => status.as_u16().into(),
            _ => Value::Null,
        }
    }

    /// The outcome, whether a repeat is safe, and the sentences after `subject` ("This
    /// action", "The last attempt of this action").
    pub(crate) fn told(self, subject: &str) -> (&'static str, bool, String) {
        let again = "Calling again with the same arguments will run it again.";
        match self {
            Self::Status(status, wait) if status.is_client_error() => {
                let when = wait.map_or(String::new(), |s| format!(" in {s} s"));
                let code = status.as_u16();
                let text = format!(
                    "{subject} was refused with status {code} and its answer was not kept. \
                     Calling again with the same arguments{when} will run it again."
                );
                ("failed", true, text)
            }
            Self::Status(status, _) => {
                let code = status.as_u16();
                let text = format!(
                    "{subject} failed with status {code} and its result was not kept. {again}"
                );
                ("failed", true, text)
            }
            Self::Error => {
                let text = format!(
                    "{subject} failed with an internal error and its result was not kept. {again}"
                );
                ("failed", true, text)
            }
            Self::Panic => {
                let text = format!(
                    "{subject} may have run: the tool crashed or stopped before it answered, so \
                     whether it took effect is not known. Check whether it did before calling \
                     again: calling again with the same arguments would run it again."
                );
                ("unknown", false, text)
            }
            Self::Body => {
                let text = format!(
                    "{subject} may have run: it answered, but its response broke off before it \
                     was complete, so whether it took effect is not known. Check whether it did \
                     before calling again: calling again with the same arguments would run it \
                     again."
                );
                ("unknown", false, text)
            }
        }
    }

    fn wait(self) -> Option<u64> {
        match self {
            Self::Status(_, wait) => wait,
            _ => None,
        }
    }
}

/// The attempt ended without a kept outcome; answered to its first caller and to duplicates
/// that waited for it.
pub(crate) fn attempt_failed(key: &IntentKey, failure: Failure) -> Answer {
    let status = match failure {
        Failure::Status(status, _) => status,
        Failure::Panic => StatusCode::INTERNAL_SERVER_ERROR,
        Failure::Error | Failure::Body => StatusCode::BAD_GATEWAY,
    };
    let (outcome, retryable, detail) = failure.told("This action");
    let answer = Answer::new(
        status,
        "attempt-failed",
        "Action failed",
        outcome,
        retryable,
        detail,
    )
    .intent(key)
    .member("last_status", failure.last_status());
    match failure.wait() {
        Some(seconds) => answer.retry_after(seconds),
        None => answer,
    }
}

/// The status path: the last attempt ended without a kept outcome.
pub(crate) fn status_failed(key: &IntentKey, failure: Failure) -> Answer {
    let (outcome, retryable, detail) = failure.told("The last attempt of this action");
    let answer = Answer::new(StatusCode::OK, "", "", outcome, retryable, detail)
        .intent(key)
        .member("last_status", failure.last_status());
    match failure.wait() {
        Some(seconds) => answer.retry_after(seconds),
        None => answer,
    }
}

/// The status path: nothing is visible to this scope.
pub(crate) fn status_not_found(key: &IntentKey) -> Answer {
    Answer::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Intent not found",
        "not_found",
        false,
        "No record of this action is visible to this session: it may never have run, its \
         record may have expired, or it belongs to another session, so whether it ran cannot \
         be told from here. If it may have run, check its effect before calling again."
            .to_owned(),
    )
    .intent(key)
}

/// The status path was asked about something that is not an intent key.
pub(crate) fn status_malformed() -> Answer {
    Answer::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Intent not found",
        "not_found",
        false,
        "This status request names no intent: an intent is the 64 hex digits of the \
         idempotency-intent header. Ask again with that value."
            .to_owned(),
    )
}

/// The status path needs the caller's scope too.
pub(crate) fn status_missing_scope(what: &str) -> Answer {
    Answer::new(
        StatusCode::BAD_REQUEST,
        "missing-scope",
        "Missing session scope",
        "not_found",
        false,
        format!(
            "This status request was not answered: it needs {what}, the same as the call it \
             asks about. Send it again with that set; this says nothing about whether the \
             action ran."
        ),
    )
}

/// The status path could not ask the store: whether the action ran cannot be told now.
pub(crate) fn status_unavailable(key: &IntentKey, status_url: &str) -> Answer {
    Answer::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "Idempotency store unavailable",
        "unavailable",
        true,
        format!(
            "Cannot tell right now whether this action ran: the idempotency store did not \
             answer. Do not repeat the action yet; ask {status_url} again in 1 s."
        ),
    )
    .intent(key)
    .retry_after(1)
}

/// The arguments break the operation's schema (the contract layer).
#[cfg(feature = "contract")]
pub(crate) fn invalid(reason: &'static str, field: &str, problem: &str, version: &str) -> Answer {
    let place = if field.is_empty() {
        "the arguments".to_owned()
    } else {
        format!("the field `{field}`")
    };
    Answer::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid",
        "Invalid arguments",
        "invalid",
        false,
        format!(
            "The action was not executed: {place} {problem}. Calling again with the same \
             arguments will be refused again; fix them first."
        ),
    )
    .member("reason", reason)
    .member("field", field)
    .member("schema_version", version)
}

/// Adds the `_idempotency` member to a replayed JSON object body, for models that never see
/// headers. The stored bytes are kept as they are around the new member; bodies that are not a
/// JSON object give `None`.
pub(crate) fn annotate(body: &Bytes, key: &IntentKey) -> Option<Bytes> {
    let object: Map<String, Value> = serde_json::from_slice(body).ok()?;
    let open = body.iter().position(|&b| b == b'{')?;
    let member = json!({
        "replayed": true,
        "intent": key.to_hex(),
        "detail": "This is the stored result of an earlier identical call; the action was not \
                   run again.",
    });
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(b"\"_idempotency\":");
    out.extend_from_slice(member.to_string().as_bytes());
    if !object.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(&body[open + 1..]);
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(answer: Answer) -> (StatusCode, Value, http::HeaderMap) {
        let response = answer.into_response();
        let status = response.status();
        let headers = response.headers().clone();
        (
            status,
            serde_json::from_slice(response.body()).unwrap(),
            headers,
        )
    }

    #[test]
    fn errors_are_problem_documents_with_the_contract_members() {
        let (status, value, headers) = body(too_busy(&IntentKey::from_bytes([7; 32])));
        assert_eq!(status, 503);
        assert_eq!(headers[header::CONTENT_TYPE], "application/problem+json");
        assert_eq!(headers[header::RETRY_AFTER], "1");
        assert_eq!(value["status"], 503);
        assert_eq!(value["outcome"], "not_executed");
        assert_eq!(value["retryable"], true);
        assert!(value["type"].as_str().unwrap().starts_with("urn:"));
        assert!(value["detail"]
            .as_str()
            .unwrap()
            .starts_with("The action was not executed"));
    }

    #[test]
    fn in_progress_says_first_that_the_action_runs() {
        let key = IntentKey::from_bytes([1; 32]);
        let keeps = "the `x-session-id` header";
        let (status, value, headers) = body(in_progress(&key, "/_idempotency/x", 7, false, keeps));
        assert_eq!(status, 202);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(headers[header::LOCATION], "/_idempotency/x");
        assert_eq!(value["retry_after_s"], 4);
        assert_eq!(value["started_s_ago"], 7);
        assert!(value.get("type").is_none());
        assert!(value["detail"]
            .as_str()
            .unwrap()
            .starts_with("This action is already running"));
        let strict = in_progress(&key, "/s", 0, true, keeps);
        assert_eq!(strict.status(), StatusCode::CONFLICT);
    }

    #[test]
    fn annotation_only_touches_json_objects() {
        let key = IntentKey::from_bytes([2; 32]);
        let out = annotate(&Bytes::from_static(br#" {"b":2, "a":1}"#), &key).unwrap();
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert!(out.ends_with(br#","b":2, "a":1}"#));
        let empty = annotate(&Bytes::from_static(b"{}"), &key).unwrap();
        assert!(serde_json::from_slice::<Value>(&empty).is_ok());
        assert_eq!(value["a"], 1);
        assert_eq!(value["_idempotency"]["replayed"], true);
        assert!(annotate(&Bytes::from_static(b"[1]"), &key).is_none());
        assert!(annotate(&Bytes::from_static(b"text"), &key).is_none());
    }
}

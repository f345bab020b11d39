//! What the layer says when it executed nothing: each of these is known for certain.

use super::attempts::failure_told;
use super::Words;
use crate::engine::{Failure, Refusal};
use crate::key::{IntentKey, KeySource};
use crate::settings::Settings;

/// The words for a refusal; `key` is the intent, where it was derived.
pub(crate) fn refusal(refusal: &Refusal, settings: &Settings, key: Option<&IntentKey>) -> Words {
    match refusal {
        Refusal::LayerFault(what) => layer_fault(what),
        Refusal::MissingScope => missing_scope(&settings.scope.describe()),
        Refusal::RepeatedScope(name) => repeated_scope(name.as_str()),
        Refusal::BodyTooLarge(limit) => body_too_large(*limit),
        Refusal::BodyUnreadable => body_unreadable(),
        Refusal::MalformedKey(source) => malformed_key(&key_source(settings, *source)),
        Refusal::Unkeyable(why) => unkeyable(why),
        Refusal::KeyReused { running } => named(key_reused(*running), key),
        Refusal::StoreUnavailable => named(store_unavailable(), key).retry_after(1),
        Refusal::StoreFull => named(store_full(), key).retry_after(STORE_FULL_RETRY_S),
        Refusal::TooBusy => named(too_busy(), key).retry_after(1),
        Refusal::BackingOff {
            failures,
            last,
            wait_s,
        } => named(backing_off(*failures, *last, *wait_s), key).retry_after(*wait_s),
    }
}

/// How an attempt that counts against the retry budget ended, in a few words after "the last".
fn briefly(failure: Failure) -> String {
    match failure {
        Failure::Status(status, _) => format!("answered status {}", status.as_u16()),
        Failure::Error => "met an error of the service in front of the tool".to_owned(),
        Failure::Answered => "was answered with an error by the tool's server".to_owned(),
        Failure::Panic => "crashed or stopped before it answered".to_owned(),
        Failure::Body => "broke off in the middle of its answer".to_owned(),
        Failure::RolledBack => "had its database transaction rolled back".to_owned(),
        Failure::CommitUnknown => "lost its connection while it committed".to_owned(),
        Failure::Cancelled => "was cancelled by the tool's server".to_owned(),
        Failure::AsksForInput => "asked for more input".to_owned(),
    }
}

/// The intent's attempts failed `failures` times in a row and its retry budget holds it back
/// for `wait_s` more seconds: this call ran nothing.
fn backing_off(failures: u32, last: Failure, wait_s: u64) -> Words {
    let (last_outcome, _, last_told) = failure_told(last, "The last attempt", None);
    let check = if last_outcome == "unknown" {
        " The last attempt may have run: check whether it took effect before calling again."
    } else {
        ""
    };
    Words::new(
        "backing-off",
        "Held back after failing repeatedly",
        "not_executed",
        true,
        format!(
            "This call was not run: its last {failures} attempts in a row ended without a kept \
             result (the last {}), so it is held back, and calling again with the same \
             arguments in {wait_s} s will run it again. Calling sooner is answered the same \
             way, without running it.{check}",
            briefly(last)
        ),
    )
    .member("failures", failures)
    .member("last_attempt", last_told)
}

/// Names the intent, where it was derived.
fn named(told: Words, key: Option<&IntentKey>) -> Words {
    match key {
        Some(key) => told.intent(key),
        None => told,
    }
}

fn key_source(settings: &Settings, source: KeySource) -> String {
    match (
        source,
        &settings.key_header,
        &settings.fingerprint.key_field,
    ) {
        (KeySource::Header, Some(name), _) => format!("the `{name}` header"),
        (KeySource::Field, _, Some(pointer)) => format!("the `{pointer}` field"),
        _ => "the request".to_owned(),
    }
}

/// A JSON body has fields to leave out of its key but no canonical form to find them in.
fn unkeyable(why: &crate::canonical::CanonicalError) -> Words {
    Words::new(
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
fn layer_fault(what: &str) -> Words {
    Words::new(
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

/// An MCP call that nothing names the caller of: no principal is configured, and the
/// request has no session (protocol 2026-07-28 has none) and no credential the layer reads
/// (`by_credential`: whether it reads one). The operator, not the caller, must change
/// something.
#[cfg(feature = "mcp")]
pub(crate) fn unnamed_mcp_caller(by_credential: bool) -> Words {
    let lacks = if by_credential {
        "The request has no `Authorization` credential and no `Mcp-Session-Id` session, and \
         no principal is configured."
    } else {
        "No principal is configured, the request has no `Mcp-Session-Id` session, and this \
         server does not tell callers apart by their credential."
    };
    Words::new(
        "missing-scope",
        "Caller cannot be told apart",
        "not_executed",
        false,
        format!(
            "This call was not run: the server cannot tell who is calling, so it cannot make \
             sure that a repeat of the call does not run it twice. {lacks} Calling again the \
             same way will be refused the same way. The server's operator must configure a \
             principal (a header that an authenticating gateway sets: `--principal-header` \
             on idempotency-proxy, `IdempotencyLayer::scope_header`), or, for a server with a \
             single user, one shared scope (`--mcp-shared-scope`, \
             `McpIdempotencyLayer::shared_scope`)."
        ),
    )
}

/// A header that names the caller came more than once: which value is the caller's is not
/// known, so no one is named.
fn repeated_scope(name: &str) -> Words {
    Words::new(
        "repeated-scope",
        "Scope header repeated",
        "not_executed",
        false,
        format!(
            "The action was not executed: the `{name}` header came more than once, so the \
             caller it names is not known. Send it once; a gateway in front should replace the \
             header, not add to it."
        ),
    )
}

/// A protected request came without a scope.
fn missing_scope(what: &str) -> Words {
    Words::new(
        "missing-scope",
        "Missing caller",
        "not_executed",
        false,
        format!(
            "The action was not executed: this endpoint needs {what} to recognise repeated \
             calls. Send the call again with it set."
        ),
    )
}

/// The request body is over the limit.
fn body_too_large(limit: usize) -> Words {
    Words::new(
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
fn body_unreadable() -> Words {
    Words::new(
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
fn malformed_key(source: &str) -> Words {
    Words::new(
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
fn key_reused(running: bool) -> Words {
    let state = if running {
        "is already running"
    } else {
        "already ran"
    };
    Words::new(
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
}

/// The store could not answer a claim, and the layer fails closed.
fn store_unavailable() -> Words {
    Words::new(
        "store-unavailable",
        "Idempotency store unavailable",
        "not_executed",
        true,
        "The action was not executed: the idempotency store could not be reached, so the call \
         could not be protected against running twice. It is safe to call again with the same \
         arguments in 1 s."
            .to_owned(),
    )
}

/// How long a caller refused by a full store is asked to wait: room comes back as records
/// pass their minimum retention or expire, in minutes rather than seconds.
const STORE_FULL_RETRY_S: u64 = 30;

/// The store had no room for a new intent's outcome, and refused it rather than drop a record
/// it keeps.
fn store_full() -> Words {
    Words::new(
        "store-full",
        "Idempotency store full",
        "not_executed",
        true,
        format!(
            "This action was not executed: the idempotency store is full, so its outcome could \
             not be kept. Nothing ran; it is safe to call again with the same arguments in \
             {STORE_FULL_RETRY_S} s."
        ),
    )
}

/// Too many detached executions are running.
fn too_busy() -> Words {
    Words::new(
        "too-busy",
        "Too many actions running",
        "not_executed",
        true,
        "The action was not executed: too many actions are already running on this server. It \
         is safe to call again with the same arguments in 1 s."
            .to_owned(),
    )
}

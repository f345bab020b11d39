//! A protected request's intent: its key from the scope, the operation and the body (or the
//! client's explicit key), and the times that bound its execution.

use std::time::Duration;

use bytes::Bytes;
use http::{header, request, HeaderValue};
use tokio::time::Instant;

use super::outcome::Refusal;
use super::recent::{Derivation, KeyInputs, RecentRequests};
use crate::key::{
    BodyFingerprint, ExplicitKey, Fingerprint, IntentKey, KeyMaterial, KeySource, ScopeHash,
    Unkeyable,
};
use crate::scope::Scope;
use crate::settings::{RetryBudget, Settings, Timing};
use crate::store::Protocol;
use crate::telemetry::Op;

/// What a dialect tells the engine of one call besides its request: the protocol it came in,
/// kept with its record, and its own deadline and retention where the dialect knows the
/// operation better than its path does; and, where the dialect relays what an execution
/// says before its answer, the relay.
#[derive(Debug, Default)]
pub(crate) struct Call {
    pub(crate) protocol: Protocol,
    pub(crate) timing: Timing,
    pub(crate) relaying: Option<super::relay::Relaying>,
}

/// One protected request's intent, as the execution and the answers need it.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    pub(crate) key: IntentKey,
    /// The operation label, for metrics.
    pub(crate) op: Op,
    pub(crate) scope: ScopeHash,
    /// Whose part of a bounded store the record counts against.
    pub(crate) share: ScopeHash,
    pub(crate) fingerprint: Fingerprint,
    /// Where the client sent its key, if it did: a payload mismatch must be refused, and a
    /// repeat must send the key again.
    pub(crate) explicit: Option<KeySource>,
    /// When the intent was derived: when its execution starts, if it runs at once.
    pub(crate) arrived: Instant,
    /// When this caller stops waiting and is told "in progress".
    pub(crate) deadline: Instant,
    /// A zero deadline: the first caller is always told "in progress", even by a tool that
    /// answered at once.
    pub(crate) asynchronous: bool,
    pub(crate) retention: Duration,
    /// How long the execution may run before it is abandoned, if it is bounded.
    pub(crate) max_execution: Option<Duration>,
    /// How soon the intent may run again after its attempts failed in a row.
    pub(crate) retry_budget: RetryBudget,
    /// The protocol the call came in, kept with its record.
    pub(crate) protocol: Protocol,
}

impl Intent {
    /// Whether an execution asked for `fingerprint` under this intent's explicit key: a
    /// client that reuses its key for other arguments is refused.
    pub(crate) fn reuses_key_for(&self, fingerprint: &Fingerprint) -> bool {
        self.explicit.is_some() && *fingerprint != self.fingerprint
    }
}

/// Derives the intent, from an explicit key where one is configured and sent.
pub(crate) fn derive(
    settings: &Settings,
    recent: &RecentRequests,
    parts: &request::Parts,
    scope: &Scope,
    body: &Bytes,
    op: &Op,
    call: Call,
) -> Result<Intent, Refusal> {
    let Call {
        protocol, timing, ..
    } = call;
    let header_value = settings
        .key_header
        .as_ref()
        .and_then(|name| parts.headers.get(name));
    let header_key = match header_value {
        Some(value) => match ExplicitKey::from_bytes(value.as_bytes()) {
            Ok(key) => Some(key),
            Err(_) => return Err(Refusal::MalformedKey(KeySource::Header)),
        },
        None => None,
    };
    let content_type = parts.headers.get(header::CONTENT_TYPE);
    let seen = KeyInputs {
        rules: settings.rules,
        scope,
        method: parts.method.as_str(),
        target: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |target| target.as_str()),
        explicit: header_value.map(HeaderValue::as_bytes),
        content_type,
        body,
    };
    let Derivation {
        printed,
        scope: scope_hash,
        key,
    } = recent.derive(&seen, || {
        let printed = settings.fingerprint.fingerprint(content_type, body);
        let key = key_of(scope, parts, &printed, header_key.as_ref());
        Derivation {
            printed,
            scope: scope_hash(scope),
            key,
        }
    });
    let key = key?;
    let source = match (&header_key, &printed.key_field) {
        (Some(_), _) => Some(KeySource::Header),
        (None, Some(_)) => Some(KeySource::Field),
        (None, None) => None,
    };
    let path = parts.uri.path();
    let deadline = timing
        .deadline
        .unwrap_or_else(|| settings.paths.deadline(path));
    let retention = timing
        .retention
        .unwrap_or_else(|| settings.paths.retention(path));
    let arrived = Instant::now();
    Ok(Intent {
        key,
        op: op.clone(),
        scope: scope_hash,
        share: scope.share(scope_hash),
        fingerprint: printed.fingerprint,
        explicit: source,
        arrived,
        deadline: crate::clock::later(arrived, deadline),
        asynchronous: deadline.is_zero(),
        retention,
        max_execution: settings.paths.max_execution(path),
        retry_budget: timing
            .retry_budget
            .unwrap_or_else(|| settings.paths.retry_budget(path)),
        protocol,
    })
}

/// Longest scope whose hash a thread remembers.
const REMEMBERED_SCOPE: usize = 256;

/// The scope's hash, remembered for the last scope this thread hashed: the requests of a busy
/// layer come from few sessions at a time, and each hash is a SHA-256 of its own.
fn scope_hash(scope: &[u8]) -> ScopeHash {
    thread_local! {
        static LAST: std::cell::RefCell<(Vec<u8>, Option<ScopeHash>)> =
            const { std::cell::RefCell::new((Vec::new(), None)) };
    }
    if scope.len() > REMEMBERED_SCOPE {
        return ScopeHash::of(scope);
    }
    LAST.with_borrow_mut(|(last, hash)| match hash {
        Some(hash) if last.as_slice() == scope => *hash,
        _ => {
            let computed = ScopeHash::of(scope);
            last.clear();
            last.extend_from_slice(scope);
            *hash = Some(computed);
            computed
        }
    })
}

/// The intent key of a request whose body `printed` fingerprinted: from the explicit key sent
/// in the header or the body's key field, else from the fingerprint; refused if the body
/// cannot be keyed or its key field is malformed.
fn key_of(
    scope: &Scope,
    parts: &request::Parts,
    printed: &BodyFingerprint,
    header_key: Option<&ExplicitKey>,
) -> Result<IntentKey, Refusal> {
    match &printed.unkeyable {
        Some(Unkeyable::Uncanonical(why)) => return Err(Refusal::Unkeyable(*why)),
        Some(Unkeyable::Panicked(panicked)) => return Err(Refusal::LayerFault(panicked.what)),
        None => {}
    }
    let field_key = match &printed.key_field {
        Some(Err(_)) => return Err(Refusal::MalformedKey(KeySource::Field)),
        Some(Ok(key)) => Some(key),
        None => None,
    };

    let material = match header_key.or(field_key) {
        Some(key) => KeyMaterial::Explicit(key),
        None => KeyMaterial::Fingerprint(&printed.fingerprint),
    };
    Ok(IntentKey::derive(
        scope,
        &parts.method,
        &parts.uri,
        material,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_scope_hash_is_always_the_hash_of_the_scope_asked() {
        let long = vec![b's'; REMEMBERED_SCOPE + 1];
        for scope in [&b"a"[..], b"a", b"b", b"a", b"", &long, b"b"] {
            assert_eq!(scope_hash(scope), ScopeHash::of(scope));
        }
    }
}

//! What the layer says about an action that ran, runs, or may have run.

use http::StatusCode;

use super::kept_for;
use super::Words;
use crate::engine::Failure;
use crate::key::IntentKey;
use crate::store::Omission;

/// The outcome, whether a repeat is safe, and the sentences after `subject` ("This action",
/// "The last attempt of this action") for an attempt that ended without a kept outcome; for
/// a key the layer frees only in `freed_in` seconds at most (the store refused its release),
/// a repeat sooner does not run the action.
pub(crate) fn failure_told(
    failure: Failure,
    subject: &str,
    freed_in: Option<u64>,
) -> (&'static str, bool, String) {
    let when = |wait: Option<u64>| wait.map_or(String::new(), |s| format!(" in {s} s"));
    let again = format!(
        "Calling again with the same arguments{} will run it again.",
        when(freed_in)
    );
    match failure {
        Failure::Status(status, wait) if status.is_client_error() => {
            let when = when(wait.max(freed_in));
            let code = status.as_u16();
            let text = format!(
                "{subject} was refused with status {code} and its answer was not kept. Calling \
                 again with the same arguments{when} will run it again."
            );
            ("failed", true, text)
        }
        Failure::Status(status, _) if status.is_server_error() || status.is_informational() => {
            let code = status.as_u16();
            let text =
                format!("{subject} failed with status {code} and its result was not kept. {again}");
            ("failed", true, text)
        }
        // A success or a redirect a rule released (another idempotency layer's own answer,
        // say): nothing failed, and what became of the action is not known here.
        Failure::Status(status, _) => {
            let code = status.as_u16();
            let text = format!(
                "{subject} was answered with status {code}, an answer that was not kept, so \
                 whether it took effect is not known here. Check whether it did before calling \
                 again: calling again with the same arguments passes it on to the tool again."
            );
            ("unknown", false, text)
        }
        // The service in front of the tool failed (a timeout, a client that lost the
        // connection): whether the request reached the tool is not known.
        Failure::Error => {
            let text = format!(
                "{subject} may have run: the service in front of the tool failed before an \
                 answer came (it timed out, or lost the connection), so whether the request \
                 reached the tool is not known. Check whether it took effect before calling \
                 again: {}",
                again.to_lowercase()
            );
            ("unknown", false, text)
        }
        Failure::Answered => {
            let text = format!(
                "{subject} failed: the tool's server answered it with an error, which was not \
                 kept. {again}"
            );
            ("failed", true, text)
        }
        Failure::AsksForInput => {
            let text = format!(
                "{subject} did not complete: the tool's server asked for more input before it \
                 would finish it, and that answer is not kept. Calling again with the same \
                 arguments{} runs it again, and the server asks again; send the input it asks \
                 for.",
                when(freed_in)
            );
            ("failed", true, text)
        }
        Failure::Cancelled => {
            let text = format!(
                "{subject} may have run: the tool's server cancelled the call before it \
                 answered, so whether it took effect is not known. Check whether it did before \
                 calling again: {}",
                again.to_lowercase()
            );
            ("unknown", false, text)
        }
        Failure::Panic => {
            let text = format!(
                "{subject} may have run: the tool crashed or stopped before it answered, so \
                 whether it took effect is not known. Check whether it did before calling \
                 again: calling again with the same arguments{} would run it again.",
                when(freed_in)
            );
            ("unknown", false, text)
        }
        // Transactional mode: the database said what became of the tool's changes.
        Failure::RolledBack => {
            let text = format!(
                "{subject} did not take effect in the database: its transaction was rolled \
                 back, so none of its database changes were kept. Calling again with the same \
                 arguments{} is safe: it runs the action once more, or answers with the \
                 execution that holds it now. Only its database changes are known undone: \
                 anything it did outside its transaction (a message sent, another service \
                 called) may have happened.",
                when(freed_in)
            );
            ("rolled_back", true, text)
        }
        Failure::CommitUnknown => {
            let text = format!(
                "{subject} may have run: the database connection broke while its transaction \
                 committed, so whether its changes were kept cannot be told right now. Calling \
                 again with the same arguments{} is safe: it answers with the kept outcome if \
                 the commit went through, and runs the action once if it did not.",
                when(freed_in)
            );
            ("unknown", true, text)
        }
        Failure::Body => {
            let text = format!(
                "{subject} may have run: it answered, but its response broke off before it was \
                 complete, so whether it took effect is not known. Check whether it did before \
                 calling again: calling again with the same arguments{} would run it again.",
                when(freed_in)
            );
            ("unknown", false, text)
        }
    }
}

fn last_status(failure: Failure) -> serde_json::Value {
    match failure {
        Failure::Status(status, _) => status.as_u16().into(),
        _ => serde_json::Value::Null,
    }
}

/// An attempt that ended without a kept outcome, told of as `subject`.
fn failed(key: &IntentKey, failure: Failure, subject: &str, freed_in: Option<u64>) -> Words {
    let (outcome, retryable, detail) = failure_told(failure, subject, freed_in);
    let told = Words::new(
        "attempt-failed",
        "Action failed",
        outcome,
        retryable,
        detail,
    )
    .intent(key)
    .member("last_status", last_status(failure));
    match failure.wait().max(freed_in) {
        Some(seconds) => told.retry_after(seconds),
        None => told,
    }
}

/// The attempt ended without a kept outcome; said to its first caller and to duplicates that
/// waited for it, or came while the key is not yet free (`freed_in`).
pub(crate) fn attempt_failed(key: &IntentKey, failure: Failure, freed_in: Option<u64>) -> Words {
    failed(key, failure, "This action", freed_in)
}

/// The status path: the last attempt ended without a kept outcome.
pub(crate) fn status_failed(key: &IntentKey, failure: Failure) -> Words {
    failed(key, failure, "The last attempt of this action", None)
}

/// Who is told that an action is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    /// The caller whose own call started it.
    Starter,
    /// A caller whose call repeated a running one, and started nothing.
    Duplicate,
    /// A caller asking the status path.
    Status,
}

impl Asker {
    /// The first sentence: what became of the action, as this caller knows it.
    fn says(self, started_s_ago: u64) -> String {
        match self {
            Self::Starter => format!(
                "This call started the action, which is still running ({started_s_ago} s so \
                 far)."
            ),
            Self::Duplicate => format!(
                "This action is already running (started {started_s_ago} s ago) and was not \
                 started again."
            ),
            Self::Status => {
                format!("This action is still running (started {started_s_ago} s ago).")
            }
        }
    }
}

/// The action is still running at the caller's deadline, told to `asker`. `keeps` names what
/// a repeat must send again besides the arguments (the scope header, the idempotency key).
pub(crate) fn in_progress(
    key: &IntentKey,
    status_url: &str,
    started_s_ago: u64,
    keeps: &str,
    asker: Asker,
) -> Words {
    let retry_after = started_s_ago.div_ceil(2).clamp(1, 30);
    let detail = format!(
        "{} Do not repeat it with new arguments: call again with the same arguments, keeping \
         {keeps}, in {retry_after} s, or GET {status_url} (keeping the same) for its result.",
        asker.says(started_s_ago)
    );
    Words::new(
        "in-progress",
        "Action already in progress",
        "in_progress",
        true,
        detail,
    )
    .intent(key)
    .member("status_url", status_url)
    .member("started_s_ago", started_s_ago)
    .member("started_by_this_call", asker == Asker::Starter)
    .retry_after(retry_after)
}

/// The action ran, but its outcome could not be classified: whether it took effect is not
/// known.
fn outcome_unknown(key: &IntentKey, status: StatusCode, expires_at_ms: u64) -> Words {
    let code = status.as_u16();
    let kept = kept_for::until(expires_at_ms);
    let detail = if matches!(code, 502 | 504) {
        format!(
            "This action may have run: a gateway in front of the tool answered status {code} \
             (it lost the tool, or gave up waiting for it), so whether the tool ran, or is \
             still running, is not known. It was not run again, and calling again with the \
             same arguments will not run it {kept}: check its effect first."
        )
    } else {
        format!(
            "This action ran (it answered status {code}), but its outcome could not be \
             classified, so whether it took effect is not known. It was not run again, and \
             calling again with the same arguments will not run it {kept}: check its effect \
             first."
        )
    };
    Words::new(
        "outcome-unknown",
        "Outcome unknown",
        "unknown",
        false,
        detail,
    )
    .intent(key)
    .member("last_status", status.as_u16())
}

/// The action's request reached the tool, but its answer was lost: whether it took effect is
/// not known.
fn answer_lost(key: &IntentKey, status: StatusCode, expires_at_ms: u64) -> Words {
    Words::new(
        "answer-lost",
        "Outcome unknown",
        "unknown",
        false,
        format!(
            "This action may have run: its request reached the tool, but no complete answer \
             came back (the connection broke, or the answer did not come in time), so whether \
             it took effect is not known. It was not run again, and calling again with the \
             same arguments will not run it {}: check its effect first.",
            kept_for::until(expires_at_ms)
        ),
    )
    .intent(key)
    .member("last_status", status.as_u16())
}

/// The tool's answer broke off after it began (its body ended in [`Interrupted`]
/// (crate::Interrupted)): said to the first caller, whose outcome is kept for `kept`.
pub(crate) fn answer_broke_off(kept: std::time::Duration) -> Words {
    Words::new(
        "answer-lost",
        "Outcome unknown",
        "unknown",
        false,
        format!(
            "This action may have run: its request reached the tool, but its answer broke off \
             before it was complete, so whether it took effect is not known. Calling again \
             with the same arguments will not run it {}: check its effect first.",
            kept_for::within(kept)
        ),
    )
}

/// The execution was abandoned at its bound: the action may have happened.
pub(crate) fn abandoned(key: &IntentKey, expires_at_ms: u64) -> Words {
    Words::new(
        "abandoned",
        "Action abandoned",
        "unknown",
        false,
        format!(
            "This action may have run: it was still running at its time limit and was \
             abandoned, so whether it took effect is not known. Calling again with the same \
             arguments will not run it {}: check its effect first.",
            kept_for::until(expires_at_ms)
        ),
    )
    .intent(key)
}

/// An operator recorded that the action ran.
fn resolved(key: &IntentKey, expires_at_ms: u64) -> Words {
    Words::new(
        "already-executed",
        "Action already executed",
        "already_executed",
        false,
        format!(
            "This action already ran: an operator checked it and recorded that it took effect, \
             so it was not run again, and its response cannot be shown here. Calling again \
             with the same arguments will not run it {}.",
            kept_for::until(expires_at_ms)
        ),
    )
    .intent(key)
}

/// The action ran, but its response was not kept; a repeat is told so until `expires_at_ms`.
pub(crate) fn already_executed(
    key: &IntentKey,
    status: StatusCode,
    why: Omission,
    expires_at_ms: u64,
) -> Words {
    let why = match why {
        Omission::TooLarge => "was too large to keep",
        Omission::NoStore => "was marked `cache-control: no-store`, so it was not kept",
        Omission::Unclassified => return outcome_unknown(key, status, expires_at_ms),
        Omission::Interrupted => return answer_lost(key, status, expires_at_ms),
        Omission::Resolved => return resolved(key, expires_at_ms),
    };
    Words::new(
        "already-executed",
        "Action already executed",
        "already_executed",
        false,
        format!(
            "This action already ran (it answered status {}) and was not run again; its \
             response {why}, so it cannot be shown here. Calling again with the same \
             arguments will not run it {}.",
            status.as_u16(),
            kept_for::until(expires_at_ms)
        ),
    )
    .intent(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_cancellation_may_have_run_and_its_error_answer_failed() {
        use crate::store::ReleaseCause;
        let cancelled = Failure::released(None, ReleaseCause::Cancelled, None);
        let (outcome, retryable, text) = failure_told(cancelled, "This action", None);
        assert_eq!((outcome, retryable), ("unknown", false));
        assert!(text.starts_with("This action may have run"), "{text}");
        let asks = Failure::released(None, ReleaseCause::InputRequired, None);
        let (outcome, retryable, text) = failure_told(asks, "This action", None);
        assert_eq!((outcome, retryable), ("failed", true));
        assert!(text.starts_with("This action did not complete"), "{text}");
        let answered = Failure::released(None, ReleaseCause::Status, None);
        let (outcome, retryable, text) = failure_told(answered, "This action", None);
        assert_eq!((outcome, retryable), ("failed", true));
        assert!(
            text.starts_with("This action failed: the tool's server"),
            "{text}"
        );
    }

    #[test]
    fn an_inner_error_is_told_as_may_have_run_never_as_a_failure() {
        let (outcome, retryable, text) = failure_told(Failure::Error, "This action", None);
        assert_eq!((outcome, retryable), ("unknown", false));
        assert!(text.starts_with("This action may have run"), "{text}");
        assert!(!text.contains("failed with"), "{text}");
    }
}

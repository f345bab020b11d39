//! The engine's outcome as an HTTP response: the tool's own, a replay, or the layer's words
//! with the status code that goes with them.

use http::{Response, StatusCode};

use super::answer::{written, written_at};
use super::replay::{replay, replay_stored};
use crate::body::ResponseBody;
use crate::engine::{Decision, Failure, Intent, Outcome, Refusal};
use crate::headers::with_intent;
use crate::settings::Settings;
use crate::wording;

/// The status code of a refusal.
pub(crate) fn refusal_status(refusal: &Refusal) -> StatusCode {
    match refusal {
        Refusal::LayerFault(_) => StatusCode::INTERNAL_SERVER_ERROR,
        Refusal::MissingScope
        | Refusal::RepeatedScope(_)
        | Refusal::BodyUnreadable
        | Refusal::MalformedKey(_)
        | Refusal::Unkeyable(_) => StatusCode::BAD_REQUEST,
        Refusal::BodyTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        Refusal::KeyReused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        Refusal::BackingOff { .. } => StatusCode::TOO_MANY_REQUESTS,
        Refusal::StoreUnavailable | Refusal::StoreFull | Refusal::TooBusy => {
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

/// The status code of an attempt that ended without a kept outcome.
fn failure_status(failure: Failure) -> StatusCode {
    match failure {
        Failure::Status(status, _) => status,
        Failure::Panic => StatusCode::INTERNAL_SERVER_ERROR,
        // Nothing of the action is kept in the database: a retry is safe, as after a 503.
        Failure::RolledBack | Failure::CommitUnknown => StatusCode::SERVICE_UNAVAILABLE,
        Failure::Error
        | Failure::Body
        | Failure::Answered
        | Failure::Cancelled
        | Failure::AsksForInput => StatusCode::BAD_GATEWAY,
    }
}

/// A refusal, answered over HTTP.
pub(crate) fn refused<B>(settings: &Settings, refusal: &Refusal) -> Response<ResponseBody<B>> {
    let told = wording::refusal(refusal, settings, None);
    written(refusal_status(refusal), &told)
}

/// 202 "in progress" (409 for duplicates in strict IETF mode), with where to ask later.
pub(crate) fn in_progress<B>(
    settings: &Settings,
    key: &crate::key::IntentKey,
    started_at_ms: u64,
    asker: wording::Asker,
    keeps: &str,
) -> Response<ResponseBody<B>> {
    let status_url = settings.status_url(key);
    let started_s_ago = crate::clock::seconds_since(started_at_ms);
    let told = wording::in_progress(key, &status_url, started_s_ago, keeps, asker);
    let status = if asker == wording::Asker::Duplicate && settings.strict_ietf {
        StatusCode::CONFLICT
    } else {
        StatusCode::ACCEPTED
    };
    written_at(status, &told, Some(&status_url))
}

/// Renders what the engine decided; every response to a derived intent names it.
pub(crate) fn render<B>(
    settings: &Settings,
    decided: Decision<Response<ResponseBody<B>>>,
) -> Response<ResponseBody<B>> {
    match decided {
        Decision::Refused(refusal) => refused(settings, &refusal),
        Decision::Keyed { intent, outcome } => {
            let response = of_intent(settings, &intent, outcome);
            with_intent(response, &intent.key)
        }
    }
}

fn of_intent<B>(
    settings: &Settings,
    intent: &Intent,
    outcome: Outcome<Response<ResponseBody<B>>>,
) -> Response<ResponseBody<B>> {
    let key = &intent.key;
    match outcome {
        Outcome::Executed(response) | Outcome::Unprotected(response, _) => response,
        Outcome::Replayed(record) | Outcome::Abandoned(record) => replay(settings, key, &record),
        Outcome::InProgress {
            started_at_ms,
            duplicate,
        } => {
            let keeps = settings.repeat_keeps(intent.explicit);
            let asker = if duplicate {
                wording::Asker::Duplicate
            } else {
                wording::Asker::Starter
            };
            in_progress(settings, key, started_at_ms, asker, &keeps)
        }
        Outcome::Failed {
            answer: Some(stored),
            ..
        } => replay_stored(settings, key, &stored),
        Outcome::Failed {
            failure,
            answer: None,
            freed_in_s,
        } => {
            let told = wording::attempt_failed(key, failure, freed_in_s);
            written(failure_status(failure), &told)
        }
        Outcome::NotExecuted(refusal) => {
            let told = wording::refusal(&refusal, settings, Some(key));
            written(refusal_status(&refusal), &told)
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::Full;

    use super::*;
    use crate::clock::now_ms;
    use crate::key::IntentKey;

    #[test]
    fn a_duplicate_in_progress_is_a_conflict_only_in_strict_ietf_mode() {
        let key = IntentKey::from_bytes([1; 32]);
        let mut settings = Settings::default();
        let answer = |settings: &Settings, duplicate| {
            in_progress::<Full<bytes::Bytes>>(settings, &key, now_ms(), duplicate, "it").status()
        };
        let duplicate = wording::Asker::Duplicate;
        assert_eq!(answer(&settings, duplicate), StatusCode::ACCEPTED);
        settings.strict_ietf = true;
        assert_eq!(answer(&settings, duplicate), StatusCode::CONFLICT);
        for other in [wording::Asker::Starter, wording::Asker::Status] {
            assert_eq!(answer(&settings, other), StatusCode::ACCEPTED, "{other:?}");
        }
    }
}

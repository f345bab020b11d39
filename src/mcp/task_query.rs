//! Task requests for the layer's own tasks, answered from the store: `tasks/get` and
//! `tasks/result` in the handshake era, `tasks/get`, `tasks/update` and `tasks/cancel` in
//! 2026-07-28.

use http::request::Parts;
use serde_json::Value;

use super::answers;
use super::answers::{stored_message, with_id};
use super::endpoint::Endpoint;
use super::envelope::TaskQuery;
use super::era::Era;
use super::task_extension;
use super::tasks::{self, TaskAnswer};
use crate::clock::seconds_since;
use crate::engine::lookup::IntentView;
use crate::key::IntentKey;
use crate::store::{KeptResponse, Record, Store};
use crate::wording;

/// Answers a task request for one of the layer's tasks; `None` for a task this caller
/// cannot see here (the server's own, or another caller's), which the server answers.
pub(crate) async fn answer_task_query<St: Store>(
    endpoint: &Endpoint<St>,
    parts: &Parts,
    query: &TaskQuery,
    era: Era,
) -> Option<Value> {
    let settings = &endpoint.engine.settings;
    // A scope function that panics finds no task: nothing leaks, nothing runs.
    let scope = settings
        .scope
        .scope_in(parts, era.narrowing())
        .ok()
        .flatten();
    let scope = scope.map(|scope| scope.to_vec());
    let ttl = settings.paths.default_retention;
    let wait = settings.paths.default_deadline;
    let answered = tasks::answer(&endpoint.engine, scope, query, wait).await?;
    let key = query.key?;
    let mut message = match answered {
        TaskAnswer::Message(message) => return Some(message),
        TaskAnswer::Seen(IntentView::Unknown) => return None,
        TaskAnswer::Seen(seen) => {
            return Some(match era {
                Era::Handshake => tasks::get(&query.id, key, &seen, ttl),
                Era::Stateless => task_extension::answer(&query.id, query.asks, key, &seen, ttl),
            })
        }
        TaskAnswer::Result(record) => result_of(&record, &query.id, &key),
        TaskAnswer::StillRunning { started_at_ms } => {
            answers::task_still_running(&query.id, &key, seconds_since(started_at_ms))
        }
    };
    if let Value::Object(message) = &mut message {
        tasks::relate(message, &query.task_id);
    }
    Some(message)
}

/// The kept result of a task, answering the query `id`.
fn result_of(record: &Record, id: &Value, key: &IntentKey) -> Value {
    match &record.response {
        KeptResponse::Full(stored) => match stored_message(stored) {
            Some(message) => with_id(message, id),
            None => answers::lost(id),
        },
        KeptResponse::Omitted { status, why } => {
            let told = wording::already_executed(key, *status, *why, record.expires_at_ms);
            answers::tool_result(id, &told, false)
        }
        KeptResponse::Abandoned => {
            let told = wording::abandoned(key, record.expires_at_ms);
            answers::tool_result(id, &told, false)
        }
    }
}

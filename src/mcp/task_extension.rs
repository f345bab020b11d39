//! The tasks extension (`io.modelcontextprotocol/tasks`, protocol 2026-07-28) for the layer's
//! own tasks: `tasks/get` shows where a task stands, with its result or error once it has
//! one; `tasks/update` has nothing to answer (the layer's tasks ask nothing); `tasks/cancel`
//! is absorbed like every cancellation of a protected call, since stopping the action
//! halfway would leave its effect unknown, and the task goes on to its result.

use serde_json::{json, Map, Value};

use super::answers::{self, stored_message};
use super::envelope::TaskAsk;
use super::era::Era;
use super::tasks::{self, TaskStatus};
use crate::engine::lookup::IntentView;
use crate::engine::Failure;
use crate::key::IntentKey;
use crate::store::{KeptResponse, Record};
use crate::wording;

/// The answer to `asks` of the task `key`, as `seen` in the store.
pub(crate) fn answer(
    id: &Value,
    asks: TaskAsk,
    key: IntentKey,
    seen: &IntentView,
    ttl: std::time::Duration,
) -> Value {
    let Some(view) = tasks::view_of(key, seen, ttl) else {
        return tasks::unknown_task(id);
    };
    match asks {
        TaskAsk::Cancel => {
            crate::telemetry::cancellation_absorbed();
            return answers::result(id, json!({}));
        }
        TaskAsk::Update => return answers::result(id, json!({})),
        TaskAsk::Get | TaskAsk::Result => {}
    }
    let mut task = view.to_extension_value();
    if let Some(told) = tasks::told_of(seen) {
        task.insert("statusMessage".to_owned(), Value::from(told));
    }
    match seen {
        IntentView::Completed(record) => finished(&mut task, record, &key),
        IntentView::Failed(tombstone) => match tasks::failed_answer(&key, Failure::of(tombstone)) {
            // Whether it ran is not known: a tool result says so, as every such answer does.
            Ok(mut result) => {
                if let Value::Object(result) = &mut result {
                    result.insert("resultType".to_owned(), Value::from("complete"));
                }
                let completed = Value::from(TaskStatus::Completed.as_str());
                task.insert("status".to_owned(), completed);
                task.insert("result".to_owned(), result);
            }
            Err(error) => {
                task.insert("error".to_owned(), error);
            }
        },
        IntentView::Running { .. } | IntentView::Unknown => {}
    }
    answers::result(id, Value::Object(task))
}

/// A finished task's `result` (a tool result of the stateless era) or, where the kept answer
/// was a JSON-RPC error, its `error` and status `failed`.
fn finished(task: &mut Map<String, Value>, record: &Record, key: &IntentKey) {
    let told = match &record.response {
        KeptResponse::Full(stored) => match stored_message(stored) {
            Some(mut message) => {
                Era::Stateless.fit(&mut message);
                if let Some(result) = message.get_mut("result").map(Value::take) {
                    task.insert("result".to_owned(), result);
                } else if let Some(error) = message.get_mut("error").map(Value::take) {
                    task.insert(
                        "status".to_owned(),
                        Value::from(TaskStatus::Failed.as_str()),
                    );
                    task.insert("error".to_owned(), error);
                }
                return;
            }
            None => {
                let mut lost = answers::lost(&Value::Null);
                Era::Stateless.fit(&mut lost);
                task.insert("result".to_owned(), lost["result"].take());
                return;
            }
        },
        KeptResponse::Omitted { status, why } => {
            wording::already_executed(key, *status, *why, record.expires_at_ms)
        }
        KeptResponse::Abandoned => wording::abandoned(key, record.expires_at_ms),
    };
    let mut message = answers::tool_result(&Value::Null, &told, false);
    Era::Stateless.fit(&mut message);
    task.insert("result".to_owned(), message["result"].take());
}

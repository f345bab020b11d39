//! MCP tasks (specification 2025-11-25, experimental), served from the store: a tool call
//! that asks to run as a task is answered at once with a task whose id is its intent, and
//! `tasks/get` and `tasks/result` read the intent's state wherever it runs.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::answers;
use super::envelope::{TaskAsk, TaskQuery};
use crate::clock::{millis, now_ms};
use crate::engine::lookup::IntentView;
use crate::engine::{Engine, Failure};
use crate::key::{IntentKey, ScopeHash};
use crate::store::{KeptResponse, Record, Store};
use crate::wording::failure_told;

/// How often a requestor is asked to poll a task.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The `_meta` member that ties a result to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskStatus {
    Working,
    Completed,
    Failed,
}

impl TaskStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Working => {
                "The action is running and must not be started again; ask tasks/result for its \
                 result."
            }
            Self::Completed => "The action ran; tasks/result gives its result.",
            Self::Failed => {
                "The last attempt ended without a kept result. Check whether it took effect \
                 before calling the tool again."
            }
        }
    }
}

/// An RFC 3339 timestamp (UTC, milliseconds) of a time in milliseconds since the epoch.
fn timestamp(ms: u64) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(time).to_string()
}

/// A task as `tasks/get` and a task-creating answer show it.
pub(crate) struct TaskView {
    pub(crate) key: IntentKey,
    pub(crate) status: TaskStatus,
    pub(crate) created_at_ms: u64,
    pub(crate) updated_at_ms: u64,
    pub(crate) ttl: Duration,
}

impl TaskView {
    /// The task's members, its status message and its two times named as given.
    fn members(&self, message: &str, ttl: &str, poll_interval: &str) -> Map<String, Value> {
        let mut task = Map::new();
        task.insert("taskId".to_owned(), self.key.to_hex().into());
        task.insert("status".to_owned(), self.status.as_str().into());
        task.insert("statusMessage".to_owned(), message.into());
        task.insert("createdAt".to_owned(), timestamp(self.created_at_ms).into());
        task.insert(
            "lastUpdatedAt".to_owned(),
            timestamp(self.updated_at_ms).into(),
        );
        task.insert(ttl.to_owned(), millis(self.ttl).into());
        task.insert(poll_interval.to_owned(), millis(POLL_INTERVAL).into());
        task
    }

    /// The task as the 2025-11-25 tasks show it.
    fn to_value(&self) -> Value {
        Value::Object(self.members(self.status.message(), "ttl", "pollInterval"))
    }

    /// The task as the tasks extension (protocol 2026-07-28) shows it: its times named
    /// `ttlMs` and `pollIntervalMs`, and a status message that points to `tasks/get`.
    pub(crate) fn to_extension_value(&self) -> Map<String, Value> {
        let message = match self.status {
            TaskStatus::Working => {
                "The action is running and must not be started again; ask tasks/get for its \
                 result."
            }
            TaskStatus::Completed => "The action ran; its result is in this answer.",
            TaskStatus::Failed => self.status.message(),
        };
        self.members(message, "ttlMs", "pollIntervalMs")
    }

    /// The answer to the call that created the task.
    pub(crate) fn created(&self, id: &Value) -> Value {
        answers::result(id, json!({ "task": self.to_value() }))
    }

    /// The answer to the call that created the task, as the tasks extension writes it: the
    /// task itself, `resultType: task`.
    pub(crate) fn created_for_extension(&self, id: &Value) -> Value {
        let mut task = self.to_extension_value();
        task.insert("resultType".to_owned(), Value::from("task"));
        answers::result(id, Value::Object(task))
    }
}

/// The JSON-RPC error for a task this caller cannot see: unknown, expired, or another
/// caller's (one answer for all three, so that nothing leaks).
pub(crate) fn unknown_task(id: &Value) -> Value {
    answers::error(
        id,
        answers::INVALID_PARAMS,
        "No such task for this caller: it is unknown, has expired, or belongs to another \
         caller, so whether its action ran cannot be told from here. If it may have run, \
         check its effect before calling the tool again.",
        Some(json!({ "outcome": "not_found", "retryable": false })),
    )
}

/// The JSON-RPC error for a task query the store could not answer.
fn unavailable(id: &Value) -> Value {
    answers::error(
        id,
        answers::INTERNAL_ERROR,
        "Cannot tell right now where this task stands: the idempotency store did not answer. \
         Do not call the tool again yet; ask about the task again in 1 s.",
        Some(json!({ "outcome": "unavailable", "retryable": true, "retry_after_s": 1 })),
    )
}

/// Answers a task request: where the task stands, or, for `tasks/result`, its result, waited
/// for up to `wait` (still running then, "in progress" as a tool result). `None`: not one of
/// the layer's tasks, for the server to answer.
pub(crate) async fn answer<St: Store>(
    engine: &Engine<St>,
    scope: Option<Vec<u8>>,
    query: &TaskQuery,
    wait: Duration,
) -> Option<TaskAnswer> {
    let key = query.key?;
    // A task this caller cannot see is not the layer's to answer: the server says what it
    // knows of the id, and learns nothing of the layer's.
    let scope = scope?;
    let scope = ScopeHash::of(&scope);
    let give_up = crate::clock::later(tokio::time::Instant::now(), wait);
    let mut pause = Duration::from_millis(10);
    loop {
        let seen = match engine.seen(&key, &scope).await {
            Ok(seen) => seen,
            Err(error) => {
                tracing::warn!(%error, "the store could not answer a task query");
                return Some(TaskAnswer::Message(unavailable(&query.id)));
            }
        };
        if query.asks != TaskAsk::Result {
            return Some(TaskAnswer::Seen(seen));
        }
        match seen {
            IntentView::Running { .. } if tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(pause.min(give_up - tokio::time::Instant::now())).await;
                pause = (pause * 3 / 2).min(Duration::from_millis(250));
            }
            IntentView::Running { started_at_ms } => {
                return Some(TaskAnswer::StillRunning { started_at_ms })
            }
            IntentView::Completed(record) => return Some(TaskAnswer::Result(record)),
            IntentView::Failed(tombstone) => {
                let failure = Failure::of(&tombstone);
                return Some(TaskAnswer::Message(failed(&query.id, &key, failure)));
            }
            IntentView::Unknown => return None,
        }
    }
}

/// An answer to a task query.
pub(crate) enum TaskAnswer {
    /// A whole JSON-RPC message.
    Message(Value),
    /// Where the task stands, for a query that does not wait.
    Seen(IntentView),
    /// The kept result, to replay with the query's id.
    Result(Arc<Record>),
    /// Still running when the query stopped waiting.
    StillRunning { started_at_ms: u64 },
}

/// `tasks/get` (2025-11-25): where the task stands.
pub(crate) fn get(id: &Value, key: IntentKey, seen: &IntentView, ttl: Duration) -> Value {
    let Some(view) = view_of(key, seen, ttl) else {
        return unknown_task(id);
    };
    let mut task = view.to_value();
    if let Some(told) = told_of(seen) {
        task["statusMessage"] = Value::from(told);
    }
    answers::result(id, task)
}

/// The task that `seen` describes; `None` for one unknown here.
pub(crate) fn view_of(key: IntentKey, seen: &IntentView, ttl: Duration) -> Option<TaskView> {
    let (status, created, updated) = match seen {
        IntentView::Running { started_at_ms } => (TaskStatus::Working, *started_at_ms, now_ms()),
        IntentView::Completed(record) => (
            TaskStatus::Completed,
            record.started_at_ms,
            record.completed_at_ms,
        ),
        IntentView::Failed(tombstone) => {
            let at = tombstone.failed_at_ms;
            (TaskStatus::Failed, at, at)
        }
        IntentView::Unknown => return None,
    };
    Some(TaskView {
        key,
        status,
        created_at_ms: created,
        updated_at_ms: updated,
        ttl,
    })
}

/// What a task's status message must say where its status alone would not tell the truth:
/// a task that may have run (abandoned, unclassified, crashed, broken off), or one whose
/// failure has a cause to name.
pub(crate) fn told_of(seen: &IntentView) -> Option<String> {
    match seen {
        IntentView::Completed(record) => match record.response {
            ref unknown if unknown.is_unknown() => Some(
                "The action may have run: whether it took effect is not known. It will not \
                     be run again by itself; check its effect before calling the tool again."
                    .to_owned(),
            ),
            KeptResponse::Full(ref stored) if stored_error(stored) => Some(
                "The server answered the call with an error, which is kept: calling the tool \
                 again with the same arguments gets the same answer."
                    .to_owned(),
            ),
            _ => None,
        },
        IntentView::Failed(tombstone) => {
            Some(failure_told(Failure::of(tombstone), "The action", None).2)
        }
        _ => None,
    }
}

/// Whether a kept answer is a JSON-RPC error.
fn stored_error(stored: &crate::store::StoredResponse) -> bool {
    answers::stored_message(stored).is_some_and(|message| message.get("error").is_some())
}

/// What a task's result is where its last attempt ended without a kept outcome: a tool
/// result saying that it may have run, where that is all that is known (`Ok`), else the
/// JSON-RPC error object naming the failure (`Err`).
pub(crate) fn failed_answer(key: &IntentKey, failure: Failure) -> Result<Value, Value> {
    let (outcome, retryable, message) = failure_told(failure, "This task's action", None);
    if outcome == "unknown" {
        let told =
            crate::wording::Words::new("unknown", "Outcome unknown", outcome, false, message);
        let mut answer = answers::tool_result(&Value::Null, &told.intent(key), false);
        return Ok(answer["result"].take());
    }
    let data = json!({ "outcome": outcome, "retryable": retryable, "intent": key.to_hex() });
    Err(json!({ "code": answers::INTERNAL_ERROR, "message": message, "data": data }))
}

fn failed(id: &Value, key: &IntentKey, failure: Failure) -> Value {
    match failed_answer(key, failure) {
        Ok(result) => answers::result(id, result),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
    }
}

/// Ties a `tasks/result` answer to its task.
pub(crate) fn relate(message: &mut Map<String, Value>, task_id: &str) {
    if let Some(Value::Object(result)) = message.get_mut("result") {
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(RELATED_TASK.to_owned(), json!({ "taskId": task_id }));
        }
    }
}

/// Marks the protected tools of a `tools/list` result as runnable as tasks
/// (`execution.taskSupport: optional`), where a tool does not say otherwise.
pub(crate) fn offer_to_tools(result: &mut Map<String, Value>, protected: impl Fn(&str) -> bool) {
    let Some(Value::Array(tools)) = result.get_mut("tools") else {
        return;
    };
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
        if !protected(name) {
            continue;
        }
        let execution = tool
            .entry("execution")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(execution) = execution {
            execution
                .entry("taskSupport")
                .or_insert_with(|| Value::from("optional"));
        }
    }
}

/// Declares in an `initialize` result that tool calls may run as tasks
/// (`capabilities.tasks.requests.tools.call`).
pub(crate) fn declare_capability(result: &mut Map<String, Value>) {
    declare(
        result,
        &["capabilities", "tasks", "requests", "tools", "call"],
    );
}

/// Declares in a `server/discover` result that the server speaks the tasks extension
/// (`capabilities.extensions["io.modelcontextprotocol/tasks"]`).
pub(crate) fn declare_extension(result: &mut Map<String, Value>) {
    declare(
        result,
        &["capabilities", "extensions", super::era::TASKS_EXTENSION],
    );
}

/// Makes sure an object stands at `path`, beside what the server declared.
fn declare(result: &mut Map<String, Value>, path: &[&str]) {
    let mut at = result;
    for member in path {
        let next = at
            .entry(*member)
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(next) = next else {
            return;
        };
        at = next;
    }
}

#[cfg(test)]
mod tests;

//! The engine's outcome for a `tools/call`, in JSON-RPC terms: the server's answer with the
//! caller's id, a replay marked as one, a task, or the layer's words as a tool result.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response};
use serde_json::Value;

use super::answers::{self, stored_message, with_id};
use super::endpoint::Endpoint;
use super::envelope::{self, ToolCall};
use super::era::Era;
use super::listing::Server;
use super::message::{self, Form};
use super::tasks::{TaskStatus, TaskView};
use super::tool::ServerAnswer;
use crate::clock::{now_ms, seconds_since};
use crate::engine::{Decision, Intent, Outcome, Refusal};
use crate::headers::{age, mark_replayed, with_intent, RequestId};
use crate::key::IntentKey;
use crate::store::{KeptResponse, Protocol, Record, StoredResponse};
use crate::wording::{self, Words};

/// What one call is rendered for.
pub(crate) struct Rendering<'a, St> {
    pub(crate) endpoint: &'a Endpoint<St>,
    pub(crate) call: &'a ToolCall,
    /// The server the call is for.
    pub(crate) server: Server,
    /// The era the answer goes to.
    pub(crate) era: Era,
    /// The form the caller accepts.
    pub(crate) form: Form,
    /// The call asked to run as a task (2025-11-25), and tasks are served.
    pub(crate) as_task: bool,
    /// The client takes a task (the tasks extension), and tasks are served: a call still
    /// running at its deadline is answered with one.
    pub(crate) offers_task: bool,
    /// How long the call's outcome is kept: a task's time to live.
    pub(crate) retention: Duration,
    /// The request's id, said in `_meta` of each result the layer writes.
    pub(crate) request_id: Option<&'a RequestId>,
}

/// A rendered answer.
enum Rendition {
    /// A JSON-RPC message, with the headers that go with it.
    Message(Value, HeaderMap),
    /// The server's own HTTP answer, as it came.
    Verbatim(Response<Bytes>),
}

impl<St> Rendering<'_, St> {
    /// The engine's decision as the response the caller gets, its body written.
    pub(crate) fn written(&self, decided: Decision<ServerAnswer>) -> Response<Bytes> {
        let form = self.form;
        let (key, said) = match decided {
            Decision::Refused(refusal) => (None, self.refused(&refusal, None)),
            Decision::Keyed { intent, outcome } => (Some(intent.key), self.keyed(&intent, outcome)),
        };
        let response = match said {
            Rendition::Message(mut message, headers) => {
                self.era.fit(&mut message);
                message::write(&message, form, headers)
            }
            Rendition::Verbatim(response) => response,
        };
        match key {
            Some(key) => with_intent(response, &key),
            None => response,
        }
    }
}

impl<St> Rendering<'_, St> {
    fn id(&self) -> &Value {
        &self.call.id
    }

    /// A refusal: a body that cannot be keyed is an envelope refusal (invalid params), the
    /// rest a tool result saying nothing was executed.
    fn refused(&self, refusal: &Refusal, key: Option<&IntentKey>) -> Rendition {
        if let Refusal::Unkeyable(why) = refusal {
            let id = self.id().clone();
            let why = why.to_string();
            let error = answers::refused(&envelope::EnvelopeRefusal::Unkeyable { id, why });
            return Rendition::Message(error, HeaderMap::new());
        }
        let settings = &self.endpoint.engine.settings;
        if matches!(refusal, Refusal::MissingScope) && !settings.scope_configured {
            let by_credential = settings.scope.names_by_credential();
            return self.told(&wording::unnamed_mcp_caller(by_credential));
        }
        self.told(&wording::refusal(refusal, settings, key))
    }

    /// The layer's words as a tool result.
    fn told(&self, told: &Words) -> Rendition {
        let mut headers = HeaderMap::new();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(seconds) = told.retry_after_s {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        let policy = &self.endpoint.policy;
        let unstructured = policy.listed_without_output_schema(self.server, &self.call.name);
        let mut message = answers::tool_result(self.id(), told, unstructured);
        self.say_request_id(&mut message);
        Rendition::Message(message, headers)
    }

    /// Puts the request's id in `_meta` of a result the layer wrote, where the request had one
    /// (a replayed result that has a `request_id` there keeps the server's).
    fn say_request_id(&self, message: &mut Value) {
        let Some(id) = self.request_id else {
            return;
        };
        let Some(Value::Object(result)) = message.get_mut("result") else {
            return;
        };
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(meta) = meta {
            let said = || Value::from(id.as_str());
            meta.entry("request_id").or_insert_with(said);
        }
    }

    fn keyed(&self, intent: &Intent, outcome: Outcome<ServerAnswer>) -> Rendition {
        let key = &intent.key;
        match outcome {
            Outcome::Executed(answer) | Outcome::Unprotected(answer, _) => match answer {
                ServerAnswer::Refused(response) => Rendition::Verbatim(response),
                ServerAnswer::Message { message, kept } => {
                    let status = if kept {
                        TaskStatus::Completed
                    } else {
                        TaskStatus::Failed
                    };
                    self.message(key, message, status)
                }
            },
            Outcome::Replayed(record) => self.replayed(key, &record),
            Outcome::Abandoned(record) => self.told(&wording::abandoned(key, record.expires_at_ms)),
            Outcome::InProgress {
                started_at_ms,
                duplicate,
            } => {
                let started_s_ago = seconds_since(started_at_ms);
                if self.as_task || self.offers_task {
                    return self.task(key, TaskStatus::Working, started_s_ago);
                }
                let settings = &self.endpoint.engine.settings;
                let status_url = settings.status_url(key);
                let keeps = settings.repeat_keeps(intent.explicit);
                let asker = if duplicate {
                    wording::Asker::Duplicate
                } else {
                    wording::Asker::Starter
                };
                let told = wording::in_progress(key, &status_url, started_s_ago, &keeps, asker);
                self.told(&told)
            }
            Outcome::Failed {
                answer: Some(stored),
                ..
            } => match stored_message(&stored) {
                Some(message) => self.message(key, message, TaskStatus::Failed),
                None => self.verbatim_or_lost(&stored),
            },
            Outcome::Failed {
                failure,
                answer: None,
                freed_in_s,
            } => self.told(&wording::attempt_failed(key, failure, freed_in_s)),
            Outcome::NotExecuted(refusal) => self.refused(&refusal, Some(key)),
        }
    }

    /// The server's answer, with the caller's id; as a task of `status` where one was asked.
    fn message(&self, key: &IntentKey, message: Value, status: TaskStatus) -> Rendition {
        if self.as_task {
            return self.task(key, status, 0);
        }
        Rendition::Message(with_id(message, self.id()), HeaderMap::new())
    }

    /// A kept record, replayed to a repeat: told to the model as a replay unless the layer
    /// was asked not to.
    fn replayed(&self, key: &IntentKey, record: &Record) -> Rendition {
        let stored = match &record.response {
            KeptResponse::Full(stored) => stored,
            KeptResponse::Omitted { status, why } => {
                let told = wording::already_executed(key, *status, *why, record.expires_at_ms);
                return self.told(&told);
            }
            KeptResponse::Abandoned => {
                return self.told(&wording::abandoned(key, record.expires_at_ms))
            }
        };
        // A record another protocol wrote holds no JSON-RPC answer to give back.
        let message = (record.protocol == Protocol::Mcp)
            .then(|| stored_message(stored))
            .flatten();
        let Some(message) = message else {
            return self.verbatim_or_lost(stored);
        };
        if self.as_task {
            return self.task(key, TaskStatus::Completed, 0);
        }
        let mut message = with_id(message, self.id());
        let ran_s_ago = seconds_since(record.completed_at_ms);
        if self.endpoint.replay_notice {
            answers::note_replay(&mut message, ran_s_ago, &key.to_hex());
            self.say_request_id(&mut message);
        }
        let mut headers = HeaderMap::new();
        mark_replayed(&mut headers);
        headers.insert(header::AGE, age(ran_s_ago));
        Rendition::Message(message, headers)
    }

    /// A stored answer that is not a JSON-RPC message: the server's own HTTP refusal, passed
    /// on as it came (with this caller's id where it holds a JSON-RPC error, as 2026-07-28
    /// servers write them); anything else cannot be read back.
    fn verbatim_or_lost(&self, stored: &StoredResponse) -> Rendition {
        if stored.status.is_success() {
            return Rendition::Message(answers::lost(self.id()), HeaderMap::new());
        }
        let body = match serde_json::from_slice::<Value>(&stored.body) {
            Ok(message @ Value::Object(_)) if message.get("id").is_some() => {
                Bytes::from(with_id(message, self.id()).to_string())
            }
            _ => stored.body.clone(),
        };
        let mut response = Response::new(body);
        *response.status_mut() = stored.status;
        *response.headers_mut() = stored.headers.clone();
        response.headers_mut().remove(header::CONTENT_LENGTH);
        Rendition::Verbatim(response)
    }

    /// The task a call created: its id is the intent. Written as the 2025-11-25 tasks write
    /// it for a call that asked for one, else as the tasks extension does.
    fn task(&self, key: &IntentKey, status: TaskStatus, started_s_ago: u64) -> Rendition {
        let now = now_ms();
        let view = TaskView {
            key: *key,
            status,
            created_at_ms: now.saturating_sub(started_s_ago * 1000),
            updated_at_ms: now,
            ttl: self.retention,
        };
        let mut created = if self.as_task {
            view.created(self.id())
        } else {
            view.created_for_extension(self.id())
        };
        self.say_request_id(&mut created);
        Rendition::Message(created, HeaderMap::new())
    }
}

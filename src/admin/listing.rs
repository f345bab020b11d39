//! One listed entry as an operator reads it, and what a listing selects.

use serde_json::{json, Value};

use crate::key::{IntentKey, ScopeHash};
use crate::store::{Entry, Event, KeptResponse, Transition};

/// What became of a listed intent, as an operator sorts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListedOutcome {
    /// An execution holds its lease.
    Running,
    /// It ran, and what it answered is kept (or that it ran, where its answer was not).
    Kept,
    /// Whether it took effect is not known (a 502 or 504, an answer lost, an execution past
    /// its bound): it is not run again within its retention unless an operator resolves it.
    Unknown,
    /// Its last attempt failed and released the key: a repeat runs it.
    Failed,
}

impl ListedOutcome {
    /// Its name in a listing and a query (`outcome=unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Kept => "kept",
            Self::Unknown => "unknown",
            Self::Failed => "failed",
        }
    }

    /// The outcome a query names.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Running, Self::Kept, Self::Unknown, Self::Failed]
            .into_iter()
            .find(|outcome| outcome.as_str() == name)
    }
}

/// What a listing selects.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Only intents with this outcome.
    pub outcome: Option<ListedOutcome>,
    /// Only calls of this operation (its label, `POST /tools/send_email`).
    pub operation: Option<String>,
    /// At most this many.
    pub limit: usize,
    /// With the kept bodies.
    pub bodies: bool,
}

impl Default for Filter {
    fn default() -> Self {
        Self {
            outcome: None,
            operation: None,
            limit: 100,
            bodies: false,
        }
    }
}

impl Filter {
    pub(super) fn selects(&self, listed: &Listed) -> bool {
        self.outcome.is_none_or(|outcome| outcome == listed.outcome)
            && (self.operation.as_deref())
                .is_none_or(|operation| listed.operation.as_deref() == Some(operation))
    }
}

/// One intent as a listing shows it; no body unless asked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Listed {
    /// The intent's key.
    pub intent: IntentKey,
    /// The operation's label, where the record keeps it.
    pub operation: Option<String>,
    /// What became of it.
    pub outcome: ListedOutcome,
    /// The status it answered, where it answered one.
    pub status: Option<u16>,
    /// Seconds since it started (running) or ended.
    pub age_s: u64,
    /// Seconds until the store lets it go, where the entry says.
    pub expires_in_s: Option<u64>,
    /// The hash of the caller's scope: never the scope itself.
    pub scope: ScopeHash,
    /// What an operator wrote when resolving it.
    pub note: Option<String>,
    /// The kept body, where asked for and kept, as text (lossy where it is not UTF-8).
    pub body: Option<String>,
    /// The intent's story, oldest first, where one intent is shown (not in a listing).
    pub history: Option<Vec<Transition>>,
}

impl Listed {
    pub(super) fn of(intent: IntentKey, entry: &Entry, bodies: bool) -> Self {
        let since = crate::clock::seconds_since;
        let mut listed = Self {
            intent,
            operation: None,
            outcome: ListedOutcome::Running,
            status: None,
            age_s: 0,
            expires_in_s: None,
            scope: ScopeHash::from_bytes([0; 32]),
            note: None,
            body: None,
            history: None,
        };
        match entry {
            Entry::Running(info) => {
                listed.age_s = since(info.started_at_ms);
                listed.scope = info.scope;
            }
            Entry::Completed(record) => {
                listed.outcome = if record.response.is_unknown() {
                    ListedOutcome::Unknown
                } else {
                    ListedOutcome::Kept
                };
                listed.operation = record.operation.as_deref().map(str::to_owned);
                listed.status = Some(record.status().as_u16());
                listed.age_s = since(record.completed_at_ms);
                let now = crate::clock::now_ms();
                listed.expires_in_s = Some(record.expires_at_ms.saturating_sub(now) / 1000);
                listed.scope = record.scope;
                listed.note = record.note.as_deref().map(str::to_owned);
                if let (true, KeptResponse::Full(stored)) = (bodies, &record.response) {
                    listed.body = Some(String::from_utf8_lossy(&stored.body).into_owned());
                }
            }
            Entry::Failed(tombstone) => {
                listed.outcome = ListedOutcome::Failed;
                listed.status = tombstone.status.map(|status| status.as_u16());
                listed.age_s = since(tombstone.failed_at_ms);
                listed.scope = tombstone.scope;
            }
        }
        listed
    }

    /// As JSON.
    pub fn to_json(&self) -> Value {
        let mut value = json!({
            "intent": self.intent.to_hex(),
            "operation": self.operation,
            "outcome": self.outcome.as_str(),
            "status": self.status,
            "age_s": self.age_s,
            "expires_in_s": self.expires_in_s,
            "scope": hex::encode(self.scope.as_bytes()),
        });
        if let Some(note) = &self.note {
            value["note"] = json!(note);
        }
        if let Some(body) = &self.body {
            value["body"] = json!(body);
        }
        if let Some(history) = &self.history {
            value["history"] = history.iter().map(transition_json).collect();
        }
        value
    }
}

/// One transition as the admin API shows it: its time in milliseconds since the Unix epoch,
/// what happened, the process, and the event's own members where it has them.
fn transition_json(transition: &Transition) -> Value {
    let mut value = json!({
        "at_ms": transition.at_ms,
        "event": transition.event.as_str(),
        "instance": transition.instance.to_string(),
    });
    match &transition.event {
        Event::Claimed => {}
        Event::Executed {
            status,
            duration_ms,
        } => {
            value["status"] = json!(status.as_u16());
            value["duration_ms"] = json!(duration_ms);
        }
        Event::Abandoned { duration_ms } => value["duration_ms"] = json!(duration_ms),
        Event::Released {
            status,
            cause,
            duration_ms,
        } => {
            value["status"] = json!(status.map(|status| status.as_u16()));
            value["cause"] = json!(cause.as_str());
            value["duration_ms"] = json!(duration_ms);
        }
        Event::Resolved { note } => value["note"] = json!(note.as_deref()),
    }
    value
}

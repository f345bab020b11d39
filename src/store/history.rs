//! An intent's story: the transitions its record keeps (each attempt's claim and outcome, an
//! operator's resolution), with their times and the process that made each, so that an
//! operator can tell what happened without the caller's logs.
//!
//! The story rides on the writes an execution makes anyway: a claim over a failed attempt
//! hands its tombstone back, and the record or tombstone the attempt leaves carries the
//! tombstone's story with this attempt's transitions after it. Replays and in-progress
//! answers write nothing, so they are counted in metrics, not kept here.

use std::fmt;
use std::sync::Arc;

use http::StatusCode;

use super::ReleaseCause;

/// How many transitions a record or tombstone keeps: past them, the oldest go.
pub const HISTORY_LIMIT: usize = 16;

/// A short name of the process that made a transition: four bytes drawn at random once per
/// process (the first half of its owner tokens' random part), written as 8 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Instance([u8; 4]);

impl Instance {
    /// This process's name.
    pub fn this() -> Self {
        let nonce = super::token::process_nonce();
        Self([nonce[0], nonce[1], nonce[2], nonce[3]])
    }

    /// An instance from its bytes (for stores that read it back).
    pub fn from_bytes(bytes: [u8; 4]) -> Self {
        Self(bytes)
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8; 4] {
        &self.0
    }
}

impl fmt::Display for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instance({self})")
    }
}

/// What happened to an intent at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// An attempt claimed the intent, and its execution began.
    Claimed,
    /// The execution ended and its outcome was kept: the status it answered, and how long
    /// it ran.
    Executed {
        /// The status it answered.
        status: StatusCode,
        /// How long it ran, in milliseconds.
        duration_ms: u64,
    },
    /// The execution was still running at its `max_execution` bound and was abandoned: it
    /// may have taken effect.
    Abandoned {
        /// How long it ran before it was abandoned, in milliseconds.
        duration_ms: u64,
    },
    /// The execution ended without an outcome to keep and the intent was released, so that a
    /// retry runs.
    Released {
        /// The status it answered, if it answered at all.
        status: Option<StatusCode>,
        /// Why it was released.
        cause: ReleaseCause,
        /// How long it ran, in milliseconds.
        duration_ms: u64,
    },
    /// An operator resolved an outcome that was not known as run.
    Resolved {
        /// What the operator wrote.
        note: Option<Arc<str>>,
    },
}

impl Event {
    /// Its name in the admin API (`claimed`, `executed`, `abandoned`, `released`,
    /// `resolved`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Executed { .. } => "executed",
            Self::Abandoned { .. } => "abandoned",
            Self::Released { .. } => "released",
            Self::Resolved { .. } => "resolved",
        }
    }
}

/// One step of an intent's story.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition {
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened.
    pub event: Event,
    /// The process that made it.
    pub instance: Instance,
}

impl Transition {
    /// `event` at `at_ms` (milliseconds since the Unix epoch), made by this process.
    pub fn new(at_ms: u64, event: Event) -> Self {
        Self::by(Instance::this(), at_ms, event)
    }

    /// `event` at `at_ms`, made by `instance`.
    pub fn by(instance: Instance, at_ms: u64, event: Event) -> Self {
        Self {
            at_ms,
            event,
            instance,
        }
    }
}

/// `before`, then `added`, keeping the last [`HISTORY_LIMIT`].
pub(crate) fn continued(
    before: &[Transition],
    added: impl IntoIterator<Item = Transition>,
) -> Vec<Transition> {
    let added = added.into_iter();
    let mut history = Vec::with_capacity(before.len() + added.size_hint().0);
    history.extend_from_slice(before);
    history.extend(added);
    let excess = history.len().saturating_sub(HISTORY_LIMIT);
    history.drain(..excess);
    history
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_story_keeps_its_last_sixteen_transitions() {
        let claims: Vec<Transition> = (0..15)
            .map(|at| Transition::new(at, Event::Claimed))
            .collect();
        let ended = Event::Executed {
            status: StatusCode::OK,
            duration_ms: 5,
        };
        let story = continued(
            &claims,
            [
                Transition::new(15, Event::Claimed),
                Transition::new(20, ended.clone()),
            ],
        );
        assert_eq!(story.len(), HISTORY_LIMIT);
        assert_eq!(story[0].at_ms, 1, "the oldest went");
        assert_eq!(story[HISTORY_LIMIT - 1].event, ended);
    }

    #[test]
    fn a_process_names_itself_in_eight_hex_digits_the_same_each_time() {
        let name = Instance::this().to_string();
        assert_eq!(name.len(), 8);
        assert!(name.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(Instance::this(), Instance::this());
    }
}

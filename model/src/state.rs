//! A state of the model: what the checker hashes (each instance's local phase, what the store
//! reads back per intent, the clock, what the specification remembers) and, beside it, the
//! trace that rebuilds the concrete store.

use std::hash::{Hash, Hasher};

use crate::step::Step;

/// Where one instance's current call stands: local state, lost when the instance crashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No call in hand.
    Idle,
    /// Its claim was acquired under `token` at `started` and the tool ran: the outcome is
    /// still to be written. `failures` counts the failed attempts before this one.
    Executing {
        intent: u8,
        token: u8,
        started: u8,
        failures: u32,
    },
    /// Another execution, started at `since`, holds the intent: the caller polls the store
    /// until it settles or `deadline` comes.
    Waiting { intent: u8, since: u8, deadline: u8 },
    /// A claim whose answer never reached its caller: the lease it may have taken is to be
    /// given back.
    GivingBack { intent: u8, token: u8 },
}

/// One instance: its phase and how many calls it has taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Instance {
    pub phase: Phase,
    pub calls: u8,
}

/// What `Store::get` reads of an intent, summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Held {
    Nothing,
    /// A live lease of an execution started at `started`.
    Running {
        started: u8,
    },
    /// A kept record: token `by`'s answer, or an operator's resolution (`by: None`),
    /// expiring at `expires`.
    Completed {
        by: Option<u8>,
        expires: u8,
    },
    /// A failure's tombstone.
    Failed {
        at: u8,
        failures: u32,
    },
}

/// The store's view of one intent and what the specification remembers of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// What the store reads back.
    pub held: Held,
    /// What the store keeps beneath a live lease (a failure's tombstone, read back once the
    /// lease lapses), as its listing shows it; `Nothing` when `held` shows it already.
    pub beneath: Held,
    /// Whether the last token granted a lease still holds one in the store (live or lapsed):
    /// whether its fenced writes would land. Read by a probe, not by `get`.
    pub holder_fenced_in: bool,
    /// The token of the last claim the store acquired since it last started.
    pub granted: Option<u8>,
    /// Until when that lease is live, by the claims and renewals the store accepted.
    pub lease_until: Option<u8>,
    /// Until when a record of an execution (or an operator's resolution) is kept: no
    /// execution may start before.
    pub kept_until: Option<u8>,
    /// A record of an execution was kept once (whether or not it still is).
    pub was_kept: bool,
    /// The last write was a release after a failure: the next claim must acquire.
    pub released: bool,
    /// How many times the tool ran.
    pub executions: u8,
}

/// What the bounds count: faults and ticks spent on the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Spent {
    pub crashes: u8,
    pub lost_answers: u8,
    pub operator: u8,
    pub restarts: u8,
}

/// The part of a state the checker hashes and compares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct View {
    pub now: u8,
    pub instances: Vec<Instance>,
    pub keys: Vec<Key>,
    pub spent: Spent,
    /// Tokens handed out so far: the next claim's is this one.
    pub tokens: u8,
    /// The properties broken on the way here ([`crate::properties::Broken`] bits).
    pub broken: u16,
}

/// A state: its view, and the trace that leads to it.
#[derive(Debug, Clone)]
pub struct State {
    pub view: View,
    /// The steps that rebuild the concrete store. Two traces that leave the same view are
    /// one state: the view holds everything that decides what happens next (what the store
    /// reads back, whose fenced writes it takes, what each instance holds, the clock), so
    /// hashing the trace too would only make the checker explore each state once per way of
    /// reaching it.
    pub trace: Vec<Step>,
    /// The interesting things that happened on the way ([`crate::properties::Seen`] bits),
    /// for the `sometimes` properties; left out of the hash for the same reason as the trace.
    pub seen: u16,
}

impl Hash for State {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view.hash(state);
    }
}

impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        self.view == other.view
    }
}

impl Eq for State {}

//! What must hold in every state the checker reaches, and what some state must show.
//!
//! A broken promise is found on the transition that breaks it, from the store's own answer,
//! and kept in the state's view ([`Broken`]); each `always` property reads one bit. The
//! `sometimes` properties read what happened on the way ([`Seen`]), so that no promise
//! holds only because the model never reaches the case it is about.

use stateright::{Model, Property};

use crate::model::StoreModel;

/// The bits of promises broken, one per `always` property.
pub struct Broken;

impl Broken {
    /// The tool ran while a record of an earlier execution (or an operator's resolution as
    /// run) was kept and alive.
    pub const RAN_WHILE_KEPT: u16 = 1 << 0;
    /// A fenced write (complete, release, renew, give back) under a token other than the last
    /// one the store granted was taken, or changed what the store holds.
    pub const STALE_OWNER_WROTE: u16 = 1 << 1;
    /// A caller was handed a record of another scope.
    pub const OTHER_SCOPE: u16 = 1 << 2;
    /// A claim made after a release was not acquired: the release did not free the intent.
    pub const RELEASE_BLOCKED: u16 = 1 << 3;
    /// A claim was acquired while another token's lease was live: two executions at once.
    pub const TWO_LEASES: u16 = 1 << 4;
    /// A caller waiting on another instance was still waiting after its deadline.
    pub const WAITED_PAST_DEADLINE: u16 = 1 << 5;
}

/// The bits of what happened on the way, one per `sometimes` property.
pub struct Seen;

impl Seen {
    pub const KEPT: u16 = 1 << 0;
    pub const REPLAYED: u16 = 1 << 1;
    pub const TAKEN_OVER: u16 = 1 << 2;
    pub const FENCED_OUT: u16 = 1 << 3;
    pub const RETRIED: u16 = 1 << 4;
    pub const WAITED_THEN_REPLAYED: u16 = 1 << 5;
    pub const IN_PROGRESS_AT_DEADLINE: u16 = 1 << 6;
    pub const GIVEN_BACK: u16 = 1 << 7;
    pub const RAN_AGAIN_AFTER_LOSS: u16 = 1 << 8;
    pub const OTHER_SCOPE_RAN_BESIDE_KEPT: u16 = 1 << 9;
    pub const RESOLVED_THEN_REPLAYED: u16 = 1 << 10;
}

/// The `always` properties: name and bit.
pub const ALWAYS: [(&str, u16); 6] = [
    (
        "at most one execution while an earlier one's record lives",
        Broken::RAN_WHILE_KEPT,
    ),
    (
        "an owner whose lease was taken over writes nothing (fencing)",
        Broken::STALE_OWNER_WROTE,
    ),
    (
        "no caller is handed another scope's record",
        Broken::OTHER_SCOPE,
    ),
    (
        "a release after a failure lets the next claim run",
        Broken::RELEASE_BLOCKED,
    ),
    (
        "one live lease at a time: one retry runs, not two",
        Broken::TWO_LEASES,
    ),
    (
        "every waiter is answered by its deadline",
        Broken::WAITED_PAST_DEADLINE,
    ),
];

/// The `sometimes` properties: name and bit.
pub const SOMETIMES: [(&str, u16); 11] = [
    ("an execution's record is kept", Seen::KEPT),
    ("a repeat is replayed from the store", Seen::REPLAYED),
    ("a lapsed lease is taken over", Seen::TAKEN_OVER),
    ("an owner's write is fenced out", Seen::FENCED_OUT),
    ("a failure's retry runs", Seen::RETRIED),
    (
        "a waiter is answered from the record",
        Seen::WAITED_THEN_REPLAYED,
    ),
    (
        "a waiter is told in progress at its deadline",
        Seen::IN_PROGRESS_AT_DEADLINE,
    ),
    ("a lost claim's lease is given back", Seen::GIVEN_BACK),
    (
        "the tool runs again once its record is gone",
        Seen::RAN_AGAIN_AFTER_LOSS,
    ),
    (
        "bob's call runs while alice's record of the same body is kept",
        Seen::OTHER_SCOPE_RAN_BESIDE_KEPT,
    ),
    (
        "an operator's resolution is replayed",
        Seen::RESOLVED_THEN_REPLAYED,
    ),
];

/// Every property, `always` ones first. Stateright takes plain functions: one per bit.
pub fn all() -> Vec<Property<StoreModel>> {
    macro_rules! always {
        ($index:expr) => {
            Property::<StoreModel>::always(ALWAYS[$index].0, |_, state| {
                state.view.broken & ALWAYS[$index].1 == 0
            })
        };
    }
    macro_rules! sometimes {
        ($index:expr) => {
            Property::<StoreModel>::sometimes(SOMETIMES[$index].0, |_, state| {
                state.seen & SOMETIMES[$index].1 != 0
            })
        };
    }
    vec![
        always!(0),
        always!(1),
        always!(2),
        always!(3),
        always!(4),
        always!(5),
        sometimes!(0),
        sometimes!(1),
        sometimes!(2),
        sometimes!(3),
        sometimes!(4),
        sometimes!(5),
        sometimes!(6),
        sometimes!(7),
        sometimes!(8),
        sometimes!(9),
        sometimes!(10),
    ]
}

/// The `always` properties a state breaks, by name.
pub fn broken_in(state: &<StoreModel as Model>::State) -> Vec<&'static str> {
    ALWAYS
        .iter()
        .filter(|(_, bit)| state.view.broken & bit != 0)
        .map(|(name, _)| *name)
        .collect()
}

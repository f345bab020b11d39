//! The model stateright checks: instances taking calls against one store, the faults that
//! may strike at any step, and the properties.

use stateright::{Model, Property};

use crate::bounds::Bounds;
use crate::intents::{self, Intent};
use crate::properties;
use crate::state::{Held, Instance, Key, Phase, Spent, State, View};
use crate::transition;

/// What can happen next: an instance's step, or a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The instance takes its next call and claims the intent.
    Call(u8),
    /// The instance takes its next call and claims, but the claim's answer is lost.
    CallLost(u8),
    /// The tool answered: its record is written (`Store::complete`).
    Succeed(u8),
    /// The tool failed for real: the intent is released with a tombstone.
    Fail(u8),
    /// The execution renews its lease.
    Renew(u8),
    /// A waiting caller polls the store.
    Poll(u8),
    /// A claim whose answer was lost is given back (`Store::abandon`).
    GiveBack(u8),
    /// The instance crashes: its call is lost, its lease stays until it lapses.
    Crash(u8),
    /// The clock moves one tick: leases and records may lapse.
    Tick,
    /// An operator removes what the store keeps of an intent.
    Remove(u8),
    /// An operator resolves an intent as run.
    Put(u8),
    /// The store restarts without what it held.
    Restart,
}

/// The store protocol, run on the crate's `MemoryStore`.
#[derive(Debug, Clone)]
pub struct StoreModel {
    pub intents: Vec<Intent>,
    pub bounds: Bounds,
}

impl StoreModel {
    /// The model within `bounds`, its intents derived by the crate's layer.
    pub fn new(bounds: Bounds) -> Self {
        let intents = intents::derive();
        assert!(
            bounds.intents() <= intents.len(),
            "the calls name an intent with no scope"
        );
        Self { intents, bounds }
    }

    fn calls_left(&self, view: &View, instance: usize) -> bool {
        usize::from(view.instances[instance].calls) < self.bounds.calls[instance].len()
    }
}

impl Model for StoreModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let key = Key {
            held: Held::Nothing,
            beneath: Held::Nothing,
            holder_fenced_in: false,
            granted: None,
            lease_until: None,
            kept_until: None,
            was_kept: false,
            released: false,
            executions: 0,
        };
        let idle = Instance {
            phase: Phase::Idle,
            calls: 0,
        };
        vec![State {
            view: View {
                now: 0,
                instances: vec![idle; self.bounds.calls.len()],
                keys: vec![key; self.bounds.intents()],
                spent: Spent::default(),
                tokens: 0,
                broken: 0,
            },
            trace: Vec::new(),
            seen: 0,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let view = &state.view;
        let bounds = &self.bounds;
        let spent = &view.spent;
        for (index, instance) in view.instances.iter().enumerate() {
            let at = u8::try_from(index).expect("a few instances");
            match instance.phase {
                Phase::Idle if self.calls_left(view, index) => {
                    actions.push(Action::Call(at));
                    if spent.lost_answers < bounds.lost_answers {
                        actions.push(Action::CallLost(at));
                    }
                }
                Phase::Idle => {}
                Phase::Executing { .. } => {
                    actions.extend([Action::Succeed(at), Action::Fail(at), Action::Renew(at)]);
                }
                Phase::Waiting { .. } => actions.push(Action::Poll(at)),
                Phase::GivingBack { .. } => actions.push(Action::GiveBack(at)),
            }
            if instance.phase != Phase::Idle && spent.crashes < bounds.crashes {
                actions.push(Action::Crash(at));
            }
        }
        // A waiter's timer fires at its deadline: the clock does not pass it while it waits.
        let due = view.instances.iter().any(|instance| {
            matches!(instance.phase, Phase::Waiting { deadline, .. } if view.now >= deadline)
        });
        if view.now < bounds.ticks && !due {
            actions.push(Action::Tick);
        }
        if spent.operator < bounds.operator {
            for intent in 0..view.keys.len() {
                let intent = u8::try_from(intent).expect("a few intents");
                actions.extend([Action::Remove(intent), Action::Put(intent)]);
            }
        }
        if spent.restarts < bounds.restarts {
            actions.push(Action::Restart);
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        Some(transition::next(self, state, action))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}

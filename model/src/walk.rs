//! Random traces: from the initial state, a seeded choice among the actions at each step
//! until none is left, every `always` property checked on the way. What `cargo test` runs
//! beside the bounded exhaustive check, so that deeper traces are tried too.

use stateright::Model;

use crate::model::{Action, StoreModel};
use crate::properties;
use crate::state::State;

/// The longest a trace runs: a waiter polling a running execution may repeat itself.
const LONGEST: usize = 60;

/// A trace that broke a property: its actions and what it broke.
#[derive(Debug)]
pub struct Counterexample {
    pub seed: u64,
    pub actions: Vec<Action>,
    pub broken: Vec<&'static str>,
}

/// What a walk of many traces found.
#[derive(Debug, Default)]
pub struct Walked {
    pub traces: usize,
    pub steps: usize,
    pub counterexample: Option<Counterexample>,
}

/// Runs `traces` random traces from `seed` on: the first that breaks a property ends the walk.
pub fn walk(model: &StoreModel, seed: u64, traces: usize) -> Walked {
    let mut walked = Walked::default();
    for trace in 0..traces {
        let seed = seed.wrapping_add(trace as u64);
        let (actions, state) = random_trace(model, seed);
        walked.traces += 1;
        walked.steps += actions.len();
        let broken = properties::broken_in(&state);
        if !broken.is_empty() {
            walked.counterexample = Some(Counterexample {
                seed,
                actions,
                broken,
            });
            return walked;
        }
    }
    walked
}

/// One random trace drawn from `seed`: its actions and its last state, which is the first
/// that broke a property if one did.
pub fn random_trace(model: &StoreModel, seed: u64) -> (Vec<Action>, State) {
    let mut random = SplitMix(seed);
    let mut state: State = model.init_states().remove(0);
    let mut taken = Vec::new();
    let mut actions = Vec::new();
    for _ in 0..LONGEST {
        actions.clear();
        model.actions(&state, &mut actions);
        if actions.is_empty() {
            break;
        }
        let action = actions[random.below(actions.len())];
        taken.push(action);
        state = model
            .next_state(&state, action)
            .expect("every action leads somewhere");
        if state.view.broken != 0 {
            break;
        }
    }
    (taken, state)
}

/// A small seeded generator (SplitMix64): the same seed draws the same traces on every
/// machine and every version of the checker.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % bound as u64) as usize
    }
}

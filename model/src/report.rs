//! An exhaustive check to the bounds, and what it found: the states explored, the time, the
//! `always` properties broken (with the trace that breaks each) and the `sometimes` ones
//! never shown.

use std::fmt;
use std::time::{Duration, Instant};

use stateright::{Checker, Model};

use crate::model::StoreModel;
use crate::properties::{ALWAYS, SOMETIMES};

/// What a breadth-first check to the bounds found.
#[derive(Debug)]
pub struct Checked {
    pub states: usize,
    pub unique_states: usize,
    pub depth: usize,
    pub elapsed: Duration,
    /// Each `always` property broken, with the actions of the shortest trace found.
    pub broken: Vec<(&'static str, Vec<String>)>,
    /// The `sometimes` properties no state showed.
    pub never_seen: Vec<&'static str>,
}

impl Checked {
    /// Every `always` property held and every `sometimes` one was shown.
    pub fn holds(&self) -> bool {
        self.broken.is_empty() && self.never_seen.is_empty()
    }

    /// Whether `property` was found broken.
    pub fn broke(&self, property: &str) -> bool {
        self.broken.iter().any(|(name, _)| *name == property)
    }
}

/// Explores every state within the model's bounds, breadth first, on `threads` threads.
pub fn check(model: StoreModel, threads: usize) -> Checked {
    let started = Instant::now();
    let checker = model.checker().threads(threads).spawn_bfs().join();
    let elapsed = started.elapsed();
    let discoveries = checker.discoveries();
    let broken = ALWAYS
        .iter()
        .filter_map(|(name, bit)| {
            let path = discoveries.get(name)?.clone();
            // The broken bit stays set after the step that broke it: the trace ends there.
            let actions = path
                .into_vec()
                .into_iter()
                .take_while(|(state, _)| state.view.broken & bit == 0)
                .filter_map(|(_, action)| action)
                .map(|action| format!("{action:?}"))
                .collect();
            Some((*name, actions))
        })
        .collect();
    let never_seen = SOMETIMES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !discoveries.contains_key(name))
        .collect();
    Checked {
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        depth: checker.max_depth(),
        elapsed,
        broken,
        never_seen,
    }
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} states generated, {} unique, depth {}, in {:.1} s",
            self.states,
            self.unique_states,
            self.depth,
            self.elapsed.as_secs_f64()
        )?;
        for (name, _) in ALWAYS {
            let verdict = if self.broke(name) { "BROKEN" } else { "holds" };
            writeln!(f, "  always    {verdict:7} {name}")?;
        }
        for (name, _) in SOMETIMES {
            let verdict = if self.never_seen.contains(&name) {
                "NEVER"
            } else {
                "seen"
            };
            writeln!(f, "  sometimes {verdict:7} {name}")?;
        }
        for (name, actions) in &self.broken {
            writeln!(f, "counterexample to \"{name}\": {}", actions.join(", "))?;
        }
        Ok(())
    }
}

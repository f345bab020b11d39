//! How far the checker explores: the calls each instance takes, the ticks of the clock and
//! the faults a trace may hold.

use std::fmt;

/// The model's bounds.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// Per instance, the intents of the calls it takes, in order (indices into the scopes:
    /// 0 is alice's call, 1 is bob's call of the same body).
    pub calls: Vec<Vec<u8>>,
    /// Ticks of the clock a trace may take.
    pub ticks: u8,
    /// Instance crashes.
    pub crashes: u8,
    /// Claims whose answer is lost on the way to their caller.
    pub lost_answers: u8,
    /// Operator removals and resolutions, together.
    pub operator: u8,
    /// Restarts of the store without its data.
    pub restarts: u8,
}

impl Bounds {
    /// What `.ci/model` explores: two instances, each taking two calls (alice's twice on
    /// one, alice's then bob's on the other), five ticks, and one of each fault.
    pub fn exhaustive() -> Self {
        Self {
            calls: vec![vec![0, 0], vec![0, 1]],
            ticks: 5,
            crashes: 1,
            lost_answers: 1,
            operator: 1,
            restarts: 1,
        }
    }

    /// What `cargo test` explores in seconds: one call on the first instance, and two ticks
    /// (a lease lapses, a waiter's deadline comes, a record outlives the trace).
    pub fn quick() -> Self {
        Self {
            calls: vec![vec![0], vec![0, 1]],
            ticks: 2,
            crashes: 1,
            lost_answers: 0,
            operator: 0,
            restarts: 1,
        }
    }

    /// What a revert switch's check explores: the quick bounds and one operator act, so that
    /// a bug of the store's operator calls is within reach too.
    pub fn revert() -> Self {
        Self {
            operator: 1,
            ..Self::quick()
        }
    }

    /// How many intents the calls name.
    pub fn intents(&self) -> usize {
        let highest = self.calls.iter().flatten().copied().max().unwrap_or(0);
        usize::from(highest) + 1
    }
}

impl fmt::Display for Bounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let calls: Vec<String> = self
            .calls
            .iter()
            .map(|calls| {
                let names: Vec<&str> = calls
                    .iter()
                    .map(|intent| crate::intents::SCOPES[usize::from(*intent)])
                    .collect();
                format!("[{}]", names.join(", "))
            })
            .collect();
        write!(
            f,
            "instances' calls {}, ticks {}, crashes {}, lost claim answers {}, operator \
             acts {}, store restarts {}",
            calls.join(" "),
            self.ticks,
            self.crashes,
            self.lost_answers,
            self.operator,
            self.restarts
        )
    }
}

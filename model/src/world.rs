//! The concrete world a trace runs in: the crate's `MemoryStore`, driven through the `Store`
//! trait, on a paused current-thread Tokio runtime whose clock only the model moves (the
//! store's leases and retentions run on Tokio's clock). A world is rebuilt for every
//! transition by replaying its trace, since the store cannot be cloned or hashed.

use std::future::Future;

use tokio::runtime::Runtime;
use tower_idempotency::store::{Entry, MemoryStore, Store};

use crate::calls;
pub use crate::calls::Answer;
use crate::intents::Intent;
use crate::step::{self, Step};

/// One store on one clock, and the steps run on them so far.
pub struct World<'a> {
    intents: &'a [Intent],
    runtime: Runtime,
    store: MemoryStore,
    now: u8,
    trace: Vec<Step>,
}

impl<'a> World<'a> {
    /// A fresh store at tick 0, with `trace` replayed on it.
    pub fn replay(intents: &'a [Intent], trace: &[Step]) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a paused runtime");
        // Made inside the runtime, as a layer makes its store.
        let store = runtime.block_on(async { MemoryStore::new() });
        let mut world = Self {
            intents,
            runtime,
            store,
            now: 0,
            trace: Vec::with_capacity(trace.len() + 2),
        };
        for step in trace {
            world.run(*step);
        }
        world
    }

    /// The current tick.
    pub fn now(&self) -> u8 {
        self.now
    }

    /// The steps run so far: the trace this world was replayed from, and what came after.
    pub fn into_trace(self) -> Vec<Step> {
        self.trace
    }

    /// Runs `step` and keeps it in the trace.
    pub fn run(&mut self, step: Step) -> Answer {
        self.trace.push(step);
        self.call(step)
    }

    /// Runs `step` without keeping it: a probe of a world about to be dropped.
    pub fn probe(&mut self, step: Step) -> Answer {
        self.call(step)
    }

    /// What the store keeps of `intent` beneath its lease, if it has a lease: the listing an
    /// operator reads (`Store::scan`) shows a tombstone that `get` hides behind a live lease.
    pub fn kept_beneath(&self, intent: u8) -> Option<Entry> {
        let key = self.intents[usize::from(intent)].key;
        let scanned = self
            .block(self.store.scan(0, 64))
            .expect("a memory store listing");
        scanned
            .entries
            .into_iter()
            .find(|(listed, entry)| *listed == key && !matches!(entry, Entry::Running(_)))
            .map(|(_, entry)| entry)
    }

    fn call(&mut self, step: Step) -> Answer {
        match step {
            Step::Tick => {
                self.runtime.block_on(tokio::time::advance(step::TICK));
                self.now += 1;
                Answer::Nothing
            }
            Step::Restart => {
                self.store = self.runtime.block_on(async { MemoryStore::new() });
                Answer::Nothing
            }
            _ => {
                let answered = calls::call(&self.store, self.intents, step, self.now);
                self.block(answered)
                    .expect("the memory store answers every call")
            }
        }
    }

    /// The summary of every answer `trace` gets, replayed from a fresh store, each with
    /// whether the intent it names was free just before (nothing live: no lease, no kept
    /// record; a tombstone or nothing), as `get` read it.
    pub fn answers(intents: &'a [Intent], trace: &[Step]) -> Vec<(String, bool)> {
        let mut world = Self::replay(intents, &[]);
        trace
            .iter()
            .map(|step| {
                let free = step.intent().is_none_or(|intent| {
                    let read = world.probe(Step::Get { intent });
                    matches!(read, Answer::Entry(None | Some(Entry::Failed(_))))
                });
                (calls::summary(&world.run(*step)), free)
            })
            .collect()
    }

    fn block<T>(&self, call: impl Future<Output = T>) -> T {
        self.runtime.block_on(call)
    }
}

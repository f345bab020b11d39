//! The concrete world a trace runs in: the crate's `MemoryStore`, driven through the `Store`
//! trait, on a paused current-thread Tokio runtime whose clock only the model moves (the
//! store's leases and retentions run on Tokio's clock). A world is rebuilt for every
//! transition by replaying its trace, since the store cannot be cloned or hashed.

use std::future::Future;

use tokio::runtime::Runtime;
use tower_idempotency::store::{Claim, Entry, Fence, MemoryStore, Store};

use crate::intents::Intent;
use crate::step::{self, Step};

/// What the store answered a step.
#[derive(Debug)]
pub enum Answer {
    Claim(Claim),
    Fence(Fence),
    Entry(Option<Entry>),
    /// An operator's call: whether it removed or wrote.
    Done(bool),
    /// A tick or a restart.
    Nothing,
}

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
        let now = self.now;
        let intents = self.intents;
        let key = |intent: u8| &intents[usize::from(intent)];
        match step {
            Step::Claim { intent, token } => {
                let request = step::claim_request(key(intent), token, now);
                let claimed = self.block(self.store.claim(&key(intent).key, &request));
                Answer::Claim(claimed.expect("the memory store answers every claim"))
            }
            Step::Complete {
                intent,
                token,
                started,
            } => {
                let record = step::record(key(intent), token, started, now);
                let retention = step::ticks(step::RETENTION);
                let owner = step::token(token);
                let written = self
                    .store
                    .complete(&key(intent).key, &owner, record, retention);
                Answer::Fence(self.block(written).expect("a memory store write"))
            }
            Step::Release {
                intent,
                token,
                failures,
                ..
            } => {
                let tombstone = step::tombstone(key(intent), now, failures);
                let ttl = step::ticks(step::FAILURE_TTL);
                let owner = step::token(token);
                let written = self.store.release(&key(intent).key, &owner, tombstone, ttl);
                Answer::Fence(self.block(written).expect("a memory store write"))
            }
            Step::Extend { intent, token } => {
                let lease = step::ticks(step::LEASE);
                let owner = step::token(token);
                let renewed = self.store.extend(&key(intent).key, &owner, lease);
                Answer::Fence(self.block(renewed).expect("a memory store write"))
            }
            Step::Abandon { intent, token } => {
                let owner = step::token(token);
                let given = self.store.abandon(&key(intent).key, &owner);
                Answer::Fence(self.block(given).expect("a memory store write"))
            }
            Step::Get { intent } => {
                let read = self.block(self.store.get(&key(intent).key));
                Answer::Entry(read.expect("a memory store read"))
            }
            Step::Remove { intent } => {
                let removed = self.block(self.store.remove(&key(intent).key));
                Answer::Done(removed.expect("a memory store removal"))
            }
            Step::Put { intent } => {
                let record = step::resolution(key(intent), now);
                let retention = step::ticks(step::RETENTION);
                let kept = self.store.put(&key(intent).key, record, retention);
                Answer::Done(self.block(kept).expect("a memory store write"))
            }
            Step::Tick => {
                self.runtime.block_on(tokio::time::advance(step::TICK));
                self.now += 1;
                Answer::Nothing
            }
            Step::Restart => {
                self.store = self.runtime.block_on(async { MemoryStore::new() });
                Answer::Nothing
            }
        }
    }

    fn block<T>(&self, call: impl Future<Output = T>) -> T {
        self.runtime.block_on(call)
    }
}

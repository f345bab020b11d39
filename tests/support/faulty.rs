//! A store that injects one fault into a chosen call: it wraps a real store (`MemoryStore`,
//! `RedisStore`) and fails, hangs, delays or panics the n-th call of one kind.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use tower_idempotency::key::IntentKey;
use tower_idempotency::store::{
    Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, Store, StoreError, Tombstone,
};

/// The store calls a fault can be put into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Claim,
    Complete,
    Release,
    Extend,
    Get,
    /// Observe mode's count (not among [`Call::ALL`], the calls of enforcing).
    Count,
}

impl Call {
    pub const ALL: [Call; 5] = [
        Call::Claim,
        Call::Complete,
        Call::Release,
        Call::Extend,
        Call::Get,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// What the faulty call does instead of answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answers an error, without reaching the inner store.
    Fail,
    /// Reaches the inner store, then answers an error: the effect happened, the answer is lost.
    FailAfter,
    /// Never answers within this long, then answers an error.
    Hang(Duration),
    /// Answers late, but answers.
    Delay(Duration),
    /// Reaches the inner store, then answers this much later: the effect happened at once.
    AnswerLate(Duration),
    /// Panics, as a custom store with a bug would.
    Panic,
}

impl Fault {
    pub const ALL: [Fault; 5] = [
        Fault::Fail,
        Fault::FailAfter,
        Fault::Hang(Duration::from_secs(3)),
        Fault::Delay(Duration::from_millis(300)),
        Fault::Panic,
    ];
}

/// One fault: which call, its ordinal among calls of that kind (0 is the first), and what
/// it does. `every` repeats it on every later call of that kind too.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub call: Call,
    pub ordinal: usize,
    pub fault: Fault,
    pub every: bool,
}

/// A store with at most one planned fault, counting its calls.
pub struct FaultyStore<S> {
    inner: S,
    plan: Option<Plan>,
    calls: Calls,
}

impl<S> FaultyStore<S> {
    pub fn new(inner: S, plan: Option<Plan>) -> Self {
        Self {
            inner,
            plan,
            calls: Calls {
                counts: Arc::new(Default::default()),
                made: Arc::new(Notify::new()),
            },
        }
    }

    /// A handle on the call counters, readable after the store moved into a layer.
    pub fn counter(&self) -> Calls {
        self.calls.clone()
    }

    /// Counts the call and says what fault, if any, it must suffer.
    fn next(&self, call: Call) -> Option<Fault> {
        let ordinal = self.calls.counts[call.index()].fetch_add(1, Ordering::SeqCst);
        self.calls.made.notify_waiters();
        let plan = self.plan?;
        let hit = plan.call == call
            && (ordinal == plan.ordinal || (plan.every && ordinal > plan.ordinal));
        hit.then_some(plan.fault)
    }
}

/// How many calls of each kind a [`FaultyStore`] received.
#[derive(Clone)]
pub struct Calls {
    counts: Arc<[AtomicUsize; 6]>,
    made: Arc<Notify>,
}

impl Calls {
    pub fn of(&self, call: Call) -> usize {
        self.counts[call.index()].load(Ordering::SeqCst)
    }

    /// Returns once the store has received `n` calls of the kind `call` (within 10 s, or the
    /// test fails).
    pub async fn reached(&self, call: Call, n: usize) {
        loop {
            let made = self.made.notified();
            if self.of(call) >= n {
                return;
            }
            tokio::time::timeout(Duration::from_secs(10), made)
                .await
                .unwrap_or_else(|_| panic!("the store did not receive {n} {call:?} call(s)"));
        }
    }
}

fn injected() -> StoreError {
    StoreError::new("injected fault")
}

/// Runs `call` through the fault, if there is one.
async fn faulted<T>(
    fault: Option<Fault>,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    // Where the fault's time is spent: before the call, instead of it, or after its answer.
    let (wait, made, answered) = match fault {
        None => return call.await,
        Some(Fault::Fail) => return Err(injected()),
        Some(Fault::Panic) => panic!("injected panic in a store call"),
        Some(Fault::FailAfter) => (Duration::ZERO, Made::Before, false),
        Some(Fault::Hang(how_long)) => (how_long, Made::Never, false),
        Some(Fault::Delay(how_long)) => (how_long, Made::After, true),
        Some(Fault::AnswerLate(how_long)) => (how_long, Made::Before, true),
    };
    let mut call = Some(call);
    let mut answer = None;
    if made == Made::Before {
        answer = Some(call.take().expect("not made yet").await);
    }
    tokio::time::sleep(wait).await;
    if made == Made::After {
        answer = Some(call.take().expect("not made yet").await);
    }
    match answer {
        Some(answer) if answered => answer,
        _ => Err(injected()),
    }
}

/// When a faulted call reaches the store, if it does.
#[derive(Clone, Copy, PartialEq)]
enum Made {
    Before,
    After,
    Never,
}

impl<S: Store> Store for FaultyStore<S> {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        faulted(self.next(Call::Claim), self.inner.claim(key, request)).await
    }
    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        let call = self.inner.complete(key, token, record, retention);
        faulted(self.next(Call::Complete), call).await
    }
    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let call = self.inner.release(key, token, tombstone, ttl);
        faulted(self.next(Call::Release), call).await
    }
    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        faulted(
            self.next(Call::Extend),
            self.inner.extend(key, token, lease),
        )
        .await
    }
    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        faulted(self.next(Call::Get), self.inner.get(key)).await
    }
    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        let call = self.inner.count_call(key, window);
        faulted(self.next(Call::Count), call).await
    }
    /// Passed on as it is, as a store wrapper must: the default renews the lease for zero
    /// time through `extend`, which a Redis store answers from what it knows it owns, so a
    /// claim that timed out and still landed kept its lease, and a status query then said
    /// "running" of an action that never ran.
    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        self.inner.abandon(key, token).await
    }
}

//! What the chaos soaks' phases share: how long a phase runs (`SOAK_SECONDS`, default 25), a
//! seeded random source (`SOAK_SEED`, printed), callers that send concurrent duplicates of
//! unique intents, and a ledger of what they heard: the body of each intent's first success,
//! the successes whose body differed from it, and the answers that were not successes.
#![allow(dead_code)] // each test binary uses the parts it needs

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::answer::Answer;

/// How long each phase sends calls and injects faults: `SOAK_SECONDS`, 25 by default.
pub fn phase_length() -> Duration {
    let seconds = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(25);
    Duration::from_secs(seconds)
}

/// The run's seed: `SOAK_SEED` where it is set, else one drawn from the clock.
pub fn seed() -> u64 {
    std::env::var("SOAK_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64
        })
}

/// SplitMix64: small, and the same sequence for the same seed.
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A time between `low` and `high` milliseconds.
    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }

    /// Blocks this thread for a time between `low` and `high` milliseconds: the random
    /// moments at which a soak's faults begin and end.
    pub fn pause(&mut self, low: u64, high: u64) {
        std::thread::sleep(self.millis(low, high));
    }
}

/// What one intent's callers heard.
#[derive(Default)]
struct Heard {
    /// The body of its first success.
    body: Option<Bytes>,
    /// Successes whose body differed from the first.
    differing: u64,
}

/// Every call of a phase, by what it was answered.
#[derive(Default)]
pub struct Ledger {
    intents: Mutex<HashMap<u64, Heard>>,
    pub requests: AtomicU64,
    /// Successes, the replays among them included.
    pub succeeded: AtomicU64,
    pub replayed: AtomicU64,
    /// 202: the intent runs elsewhere, ask later.
    pub in_progress: AtomicU64,
    /// Other answers, by status: refusals while the store is down, rollbacks.
    others: Mutex<BTreeMap<u16, u64>>,
    /// Calls that got no answer: the instance stopping, the call timing out.
    pub unanswered: AtomicU64,
}

impl Ledger {
    /// Notes what a call of intent `id` got; a success is a status in 200..=201.
    pub fn note(&self, id: u64, answer: Result<Answer, String>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let answer = match answer {
            Ok(answer) => answer,
            Err(_) => {
                self.unanswered.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        match answer.status.as_u16() {
            200 | 201 => {
                self.succeeded.fetch_add(1, Ordering::Relaxed);
                if answer.replayed() {
                    self.replayed.fetch_add(1, Ordering::Relaxed);
                }
                let mut intents = self.intents.lock().unwrap();
                let heard = intents.entry(id).or_default();
                match &heard.body {
                    None => heard.body = Some(answer.body),
                    Some(first) if *first != answer.body => heard.differing += 1,
                    Some(_) => {}
                }
            }
            202 => {
                self.in_progress.fetch_add(1, Ordering::Relaxed);
            }
            status => {
                *self.others.lock().unwrap().entry(status).or_default() += 1;
            }
        }
    }

    /// The intents that were answered with a success, with the first success's body.
    pub fn kept(&self) -> Vec<(u64, Bytes)> {
        let intents = self.intents.lock().unwrap();
        let mut kept: Vec<_> = intents
            .iter()
            .filter_map(|(id, heard)| Some((*id, heard.body.clone()?)))
            .collect();
        kept.sort_by_key(|(id, _)| *id);
        kept
    }

    /// Successes whose body differed from their intent's first.
    pub fn differing(&self) -> u64 {
        let intents = self.intents.lock().unwrap();
        intents.values().map(|heard| heard.differing).sum()
    }

    /// The answers that were neither a success nor 202, as `status×count` pairs.
    pub fn others(&self) -> String {
        let others = self.others.lock().unwrap();
        let pairs: Vec<String> = others
            .iter()
            .map(|(status, count)| format!("{status}×{count}"))
            .collect();
        if pairs.is_empty() {
            "none".to_owned()
        } else {
            pairs.join(" ")
        }
    }

    pub fn count(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// Sends calls until `until`: `workers` callers, each picking an intent (a fresh one half the
/// time, else one of the last 40) and sending `copies` duplicates of it at once, each to a
/// random one of two instances. `call(id, instance)` makes one call; its answer is noted.
/// The last intent id drawn, plus one.
pub async fn send_duplicates<F, C>(
    ledger: Arc<Ledger>,
    seed: u64,
    workers: u64,
    copies: usize,
    until: Instant,
    call: F,
) -> u64
where
    F: Fn(u64, usize) -> C + Clone + Send + Sync + 'static,
    C: Future<Output = Result<Answer, String>> + Send + 'static,
{
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let (ledger, next, call) = (Arc::clone(&ledger), Arc::clone(&next), call.clone());
        tasks.push(tokio::spawn(async move {
            let mut random = Random::new(seed ^ (worker + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
            while Instant::now() < until {
                let newest = next.load(Ordering::SeqCst);
                let id = if newest < 40 || random.below(2) == 0 {
                    next.fetch_add(1, Ordering::SeqCst)
                } else {
                    newest - 1 - random.below(40)
                };
                let calls = (0..copies).map(|_| {
                    let instance = random.below(2) as usize;
                    let call = call.clone();
                    async move {
                        // A call left waiting past this is counted unanswered.
                        let limit = Duration::from_secs(15);
                        tokio::time::timeout(limit, call(id, instance))
                            .await
                            .unwrap_or_else(|_| Err("no answer within 15 s".to_owned()))
                    }
                });
                for answer in futures_util::future::join_all(calls).await {
                    ledger.note(id, answer);
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    next.load(Ordering::SeqCst)
}

/// What a repeat of a kept intent got once the faults stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Repeat {
    /// Replayed with the body first answered.
    Replayed,
    /// Replayed with another body.
    Differs,
    /// Run again: its record was lost.
    RanAgain,
    /// Not settled within the limit (in progress, or refused).
    Unsettled(u16),
}

/// Calls intent `id` again until it is settled, for at most `limit`: a replay, or a success
/// that was not one.
pub async fn repeat<C>(first: &Bytes, limit: Duration, mut call: impl FnMut() -> C) -> Repeat
where
    C: Future<Output = Result<Answer, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        let status = match call().await {
            Ok(answer) if matches!(answer.status.as_u16(), 200 | 201) => {
                return match (answer.replayed(), answer.body == *first) {
                    (false, _) => Repeat::RanAgain,
                    (true, true) => Repeat::Replayed,
                    (true, false) => Repeat::Differs,
                };
            }
            Ok(answer) => answer.status.as_u16(),
            Err(_) => 0,
        };
        if Instant::now() >= deadline {
            return Repeat::Unsettled(status);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Calls every kept intent again, sixteen at a time, through `call(id)`, each until it is
/// settled (at most 30 s): what each repeat found.
pub async fn repeat_kept<C>(kept: &[(u64, Bytes)], call: impl Fn(u64) -> C) -> Vec<(u64, Repeat)>
where
    C: Future<Output = Result<Answer, String>>,
{
    let mut repeats = Vec::new();
    for chunk in kept.chunks(16) {
        let checks = chunk.iter().map(|(id, first)| {
            let call = &call;
            async move {
                let again = repeat(first, Duration::from_secs(30), || call(*id)).await;
                (*id, again)
            }
        });
        repeats.extend(futures_util::future::join_all(checks).await);
    }
    repeats
}

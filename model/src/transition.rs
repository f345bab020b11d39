//! One transition: the store rebuilt from the trace, the action's store calls made as the
//! engine makes them (the claim of `engine::claim`, the poll of `engine::elsewhere`, the
//! write of `engine::recorder`, the renewal of `engine::execute`, the give-back of a claim
//! whose answer was lost), every answer checked against the properties, and the new view
//! read back from the store.

use tower_idempotency::store::{Claim, Entry, Fence, KeptResponse, Omission, Record};

use crate::model::{Action, StoreModel};
use crate::properties::{Broken, Seen};
use crate::state::{Held, Phase, State, View};
use crate::step::{self, Step, LEASE, RETENTION};
use crate::world::{Answer, World};

/// The state after `action`.
pub fn next(model: &StoreModel, state: &State, action: Action) -> State {
    let mut world = World::replay(&model.intents, &state.trace);
    let mut turn = Turn {
        model,
        view: state.view.clone(),
        seen: state.seen,
        // A write the store refused must leave the intent as it was.
        unchanged: None,
    };
    let before = state.view.keys.clone();
    turn.act(&mut world, action);
    read_back(&mut world, &mut turn.view);
    if let Some(intent) = turn.unchanged {
        let (was, is) = (&before[intent], &turn.view.keys[intent]);
        let read = |key: &crate::state::Key| (key.held, key.beneath, key.holder_fenced_in);
        if read(was) != read(is) {
            turn.view.broken |= Broken::STALE_OWNER_WROTE;
        }
    }
    let now = turn.view.now;
    let late = turn.view.instances.iter().any(
        |instance| matches!(instance.phase, Phase::Waiting { deadline, .. } if now > deadline),
    );
    if late {
        turn.view.broken |= Broken::WAITED_PAST_DEADLINE;
    }
    State {
        view: turn.view,
        trace: world.into_trace(),
        seen: turn.seen,
    }
}

/// A transition under way.
struct Turn<'m> {
    model: &'m StoreModel,
    view: View,
    seen: u16,
    unchanged: Option<usize>,
}

impl Turn<'_> {
    fn act(&mut self, world: &mut World<'_>, action: Action) {
        let now = self.view.now;
        match action {
            Action::Call(at) | Action::CallLost(at) => {
                let instance = &mut self.view.instances[usize::from(at)];
                let intent = self.model.bounds.calls[usize::from(at)][usize::from(instance.calls)];
                instance.calls += 1;
                let lost = matches!(action, Action::CallLost(_));
                if lost {
                    self.view.spent.lost_answers += 1;
                }
                self.claim(world, at, intent, now + step::DEADLINE, lost);
            }
            Action::Succeed(at) => {
                let Phase::Executing {
                    intent,
                    token,
                    started,
                    ..
                } = self.phase(at)
                else {
                    unreachable!("only an execution succeeds")
                };
                let step = Step::Complete {
                    intent,
                    token,
                    started,
                };
                if self.fenced(world, intent, token, step) {
                    let key = &mut self.view.keys[usize::from(intent)];
                    key.kept_until = Some(now + RETENTION);
                    key.was_kept = true;
                    key.lease_until = None;
                    key.released = false;
                    self.seen |= Seen::KEPT;
                }
                self.set_phase(at, Phase::Idle);
            }
            Action::Fail(at) => {
                let Phase::Executing {
                    intent,
                    token,
                    started,
                    failures,
                } = self.phase(at)
                else {
                    unreachable!("only an execution fails")
                };
                let failures = failures + 1;
                let step = Step::Release {
                    intent,
                    token,
                    started,
                    failures,
                };
                if self.fenced(world, intent, token, step) {
                    let key = &mut self.view.keys[usize::from(intent)];
                    key.lease_until = None;
                    key.released = true;
                }
                self.set_phase(at, Phase::Idle);
            }
            Action::Renew(at) => {
                let Phase::Executing { intent, token, .. } = self.phase(at) else {
                    unreachable!("only an execution renews")
                };
                if self.fenced(world, intent, token, Step::Extend { intent, token }) {
                    self.view.keys[usize::from(intent)].lease_until = Some(now + LEASE);
                }
            }
            Action::GiveBack(at) => {
                let Phase::GivingBack { intent, token } = self.phase(at) else {
                    unreachable!("only a lost claim is given back")
                };
                if self.fenced(world, intent, token, Step::Abandon { intent, token }) {
                    self.view.keys[usize::from(intent)].lease_until = Some(now);
                    self.seen |= Seen::GIVEN_BACK;
                }
                self.set_phase(at, Phase::Idle);
            }
            Action::Poll(at) => self.poll(world, at),
            Action::Crash(at) => {
                self.view.spent.crashes += 1;
                self.set_phase(at, Phase::Idle);
            }
            Action::Tick => {
                world.run(Step::Tick);
                self.view.now += 1;
                let now = self.view.now;
                for key in &mut self.view.keys {
                    // A time past is forgotten, so that states that differ only in it are one.
                    key.lease_until = key.lease_until.filter(|until| now < *until);
                    key.kept_until = key.kept_until.filter(|until| now < *until);
                }
            }
            Action::Remove(intent) => {
                self.view.spent.operator += 1;
                if let Answer::Done(true) = world.run(Step::Remove { intent }) {
                    self.view.keys[usize::from(intent)].kept_until = None;
                }
            }
            Action::Put(intent) => {
                self.view.spent.operator += 1;
                if let Answer::Done(true) = world.run(Step::Put { intent }) {
                    let key = &mut self.view.keys[usize::from(intent)];
                    key.kept_until = Some(now + RETENTION);
                    key.released = false;
                }
            }
            Action::Restart => {
                world.run(Step::Restart);
                self.view.spent.restarts += 1;
                for key in &mut self.view.keys {
                    key.granted = None;
                    key.lease_until = None;
                    key.kept_until = None;
                    key.released = false;
                }
            }
        }
    }

    fn phase(&self, at: u8) -> Phase {
        self.view.instances[usize::from(at)].phase
    }

    fn set_phase(&mut self, at: u8, phase: Phase) {
        self.view.instances[usize::from(at)].phase = phase;
    }

    /// Makes a fenced write under `token`: whether the store took it. One taken from a token
    /// other than the last one granted breaks fencing; one refused must change nothing.
    fn fenced(&mut self, world: &mut World<'_>, intent: u8, token: u8, step: Step) -> bool {
        let granted = self.view.keys[usize::from(intent)].granted;
        let Answer::Fence(fence) = world.run(step) else {
            unreachable!("a fenced write answers with its fence")
        };
        match fence {
            Fence::Held if granted != Some(token) => {
                self.view.broken |= Broken::STALE_OWNER_WROTE;
                false
            }
            Fence::Held => true,
            _ => {
                self.unchanged = Some(usize::from(intent));
                if !matches!(step, Step::Extend { .. } | Step::Abandon { .. }) {
                    self.seen |= Seen::FENCED_OUT;
                }
                false
            }
        }
    }

    /// The claim of `engine::claim`, and what its answer leaves the instance doing.
    fn claim(&mut self, world: &mut World<'_>, at: u8, intent: u8, deadline: u8, lost: bool) {
        let now = self.view.now;
        let token = self.view.tokens;
        self.view.tokens += 1;
        let key = self.view.keys[usize::from(intent)];
        let answer = world.run(Step::Claim { intent, token });
        let Answer::Claim(claimed) = answer else {
            unreachable!("a claim answers with a claim")
        };
        let phase = match claimed {
            Claim::Acquired(_) | Claim::AcquiredAfterFailure(..) => {
                if key.lease_until.is_some_and(|until| now < until) {
                    self.view.broken |= Broken::TWO_LEASES;
                }
                if key.granted.is_some() && key.holder_fenced_in {
                    self.seen |= Seen::TAKEN_OVER;
                }
                let failures = match &claimed {
                    Claim::AcquiredAfterFailure(_, tombstone) => tombstone.failures,
                    _ => 0,
                };
                let key = &mut self.view.keys[usize::from(intent)];
                key.granted = Some(token);
                key.lease_until = Some(now + LEASE);
                key.released = false;
                if lost {
                    Phase::GivingBack { intent, token }
                } else {
                    self.executed(intent, failures > 0);
                    Phase::Executing {
                        intent,
                        token,
                        started: now,
                        failures,
                    }
                }
            }
            Claim::Running(info) => {
                if key.released {
                    self.view.broken |= Broken::RELEASE_BLOCKED;
                }
                if lost {
                    Phase::GivingBack { intent, token }
                } else if now >= deadline {
                    self.seen |= Seen::IN_PROGRESS_AT_DEADLINE;
                    Phase::Idle
                } else {
                    let since = step::tick_of(info.started_at_ms);
                    Phase::Waiting {
                        intent,
                        since,
                        deadline,
                    }
                }
            }
            Claim::Completed(record) => {
                if key.released {
                    self.view.broken |= Broken::RELEASE_BLOCKED;
                }
                if lost {
                    Phase::GivingBack { intent, token }
                } else {
                    self.handed(intent, &record);
                    Phase::Idle
                }
            }
            _ => unreachable!("the store answered a claim it does not know"),
        };
        self.set_phase(at, phase);
    }

    /// The tool runs for `intent`.
    fn executed(&mut self, intent: u8, after_failure: bool) {
        let now = self.view.now;
        let key = self.view.keys[usize::from(intent)];
        if key.kept_until.is_some_and(|until| now < until) {
            self.view.broken |= Broken::RAN_WHILE_KEPT;
        }
        if key.was_kept && key.kept_until.is_none() {
            self.seen |= Seen::RAN_AGAIN_AFTER_LOSS;
        }
        if after_failure {
            self.seen |= Seen::RETRIED;
        }
        let others_kept = self.view.keys.iter().enumerate().any(|(other, key)| {
            other != usize::from(intent) && key.was_kept && key.kept_until.is_some()
        });
        if others_kept {
            self.seen |= Seen::OTHER_SCOPE_RAN_BESIDE_KEPT;
        }
        self.view.keys[usize::from(intent)].executions += 1;
    }

    /// A caller of `intent` is handed `record`: it must carry the caller's scope.
    fn handed(&mut self, intent: u8, record: &Record) {
        if record.scope != self.model.intents[usize::from(intent)].scope {
            self.view.broken |= Broken::OTHER_SCOPE;
        }
        self.seen |= Seen::REPLAYED;
        if matches!(
            record.response,
            KeptResponse::Omitted {
                why: Omission::Resolved,
                ..
            }
        ) {
            self.seen |= Seen::RESOLVED_THEN_REPLAYED;
        }
    }

    /// The poll of `engine::elsewhere`: a record answers, a failure since the wait began
    /// answers, a running execution keeps the caller waiting until its deadline, and anything
    /// else sends it back to claim.
    fn poll(&mut self, world: &mut World<'_>, at: u8) {
        let Phase::Waiting {
            intent,
            since,
            deadline,
        } = self.phase(at)
        else {
            unreachable!("only a waiter polls")
        };
        let now = self.view.now;
        let Answer::Entry(read) = world.run(Step::Get { intent }) else {
            unreachable!("a read answers with an entry")
        };
        match read {
            Some(Entry::Running(_)) if now >= deadline => {
                self.seen |= Seen::IN_PROGRESS_AT_DEADLINE;
                self.set_phase(at, Phase::Idle);
            }
            Some(Entry::Running(_)) => {}
            Some(Entry::Completed(record)) => {
                self.handed(intent, &record);
                self.seen |= Seen::WAITED_THEN_REPLAYED;
                self.set_phase(at, Phase::Idle);
            }
            Some(Entry::Failed(tombstone)) if step::tick_of(tombstone.failed_at_ms) >= since => {
                self.set_phase(at, Phase::Idle);
            }
            _ => self.claim(world, at, intent, deadline, false),
        }
    }
}

/// Reads the store's view of every intent: what `get` answers, what the listing shows beneath
/// a live lease, then (probes that change the store, on a world about to be dropped) whether
/// the last token granted still holds a lease.
fn read_back(world: &mut World<'_>, view: &mut View) {
    for (index, key) in view.keys.iter_mut().enumerate() {
        let intent = u8::try_from(index).expect("a few intents");
        let Answer::Entry(read) = world.probe(Step::Get { intent }) else {
            unreachable!("a read answers with an entry")
        };
        key.held = summary(read);
        key.beneath = match key.held {
            Held::Running { .. } => summary(world.kept_beneath(intent)),
            _ => Held::Nothing,
        };
    }
    for (index, key) in view.keys.iter_mut().enumerate() {
        let intent = u8::try_from(index).expect("a few intents");
        key.holder_fenced_in = key.granted.is_some_and(|token| {
            let probe = world.probe(Step::Extend { intent, token });
            matches!(probe, Answer::Fence(Fence::Held))
        });
    }
}

/// An entry of the store, summarised.
fn summary(read: Option<Entry>) -> Held {
    match read {
        None => Held::Nothing,
        Some(Entry::Running(info)) => Held::Running {
            started: step::tick_of(info.started_at_ms),
        },
        Some(Entry::Completed(record)) => Held::Completed {
            by: match &record.response {
                KeptResponse::Full(answer) => answer.body.first().copied(),
                _ => None,
            },
            expires: step::tick_of(record.expires_at_ms),
        },
        Some(Entry::Failed(tombstone)) => Held::Failed {
            at: step::tick_of(tombstone.failed_at_ms),
            failures: tombstone.failures,
        },
        Some(_) => unreachable!("the store read an entry it does not know"),
    }
}

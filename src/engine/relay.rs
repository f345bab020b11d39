//! What an execution says before its answer, relayed as it comes to the one caller attached
//! to it: the events go to that caller, and the questions the execution asked (requests that
//! wait on the caller's answer) are asked again of a caller that takes over when it has gone.
//!
//! The engine holds one relay per execution in its in-flight slot and attaches each of the
//! execution's callers in this process: the first is handed the events; a duplicate that
//! joins while it is there waits as before and gets only the outcome, and takes over (the
//! latest one first) when the caller handed the events goes. Events are opaque bytes here:
//! the dialect writes and reads them.

// Only the MCP dialect attaches callers and relays events today: the HTTP one answers its
// caller once.
#![cfg_attr(not(feature = "mcp"), allow(dead_code, reason = "MCP relays events"))]

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;

use crate::key::IntentKey;

/// How many events one caller may leave unread before more are dropped for it: a caller that
/// does not read must not hold the execution up.
const UNREAD: usize = 256;

/// One execution's relay.
#[derive(Default)]
pub(crate) struct Relay {
    callers: Mutex<Callers>,
    /// Told when whether the execution waits on a caller may have changed.
    changed: Notify,
}

#[derive(Default)]
struct Callers {
    numbered: u64,
    /// The caller handed the events now.
    current: Option<Listener>,
    /// Callers waiting to take over, the latest last.
    standby: Vec<Listener>,
    /// The questions not answered yet, by the dialect's id, as they were sent.
    asks: Vec<(String, Bytes)>,
}

struct Listener {
    no: u64,
    events: mpsc::Sender<Bytes>,
}

impl Callers {
    /// Makes `listener` the caller handed the events, asking it what is still unanswered.
    fn hand_to(&mut self, listener: Listener) {
        for (_, ask) in &self.asks {
            let _ = listener.events.try_send(ask.clone());
        }
        self.current = Some(listener);
    }

    /// The latest caller waiting takes over from one that has gone.
    fn take_over(&mut self) {
        self.current = None;
        while let Some(next) = self.standby.pop() {
            if !next.events.is_closed() {
                self.hand_to(next);
                return;
            }
        }
    }
}

/// A caller of an execution, attached to its relay: the events it is handed, in order.
/// Dropped, it detaches, and the latest caller waiting takes over.
pub(crate) struct Attachment {
    relay: Arc<Relay>,
    no: u64,
    events: mpsc::Receiver<Bytes>,
    /// The intent of the execution, as the engine attached the caller to it.
    pub(crate) intent: Option<IntentKey>,
}

/// What a dialect hands the engine to relay one call: the relay its work writes to if it
/// runs the execution, and, for a caller that listens, where the engine hands back its
/// attachment (to this relay, or to that of the execution it joins).
pub(crate) struct Relaying {
    pub(crate) relay: Arc<Relay>,
    pub(crate) attachment: Option<oneshot::Sender<Attachment>>,
}

impl std::fmt::Debug for Relaying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Relaying")
    }
}

/// One caller's place on a relay, as the engine keeps it to hold back its deadline.
#[derive(Clone)]
pub(crate) struct Hold {
    relay: Arc<Relay>,
    no: u64,
}

impl Relay {
    /// Attaches a caller: handed the events now if no caller is, else waiting to take over.
    pub(crate) fn attach(self: &Arc<Self>) -> Attachment {
        let (sender, events) = mpsc::channel(UNREAD);
        let mut callers = self.lock();
        callers.numbered += 1;
        let no = callers.numbered;
        let listener = Listener { no, events: sender };
        let handed = callers
            .current
            .as_ref()
            .is_some_and(|current| !current.events.is_closed());
        if handed {
            callers.standby.push(listener);
        } else {
            callers.hand_to(listener);
        }
        drop(callers);
        self.changed.notify_waiters();
        Attachment {
            relay: Arc::clone(self),
            no,
            events,
            intent: None,
        }
    }

    /// Relays one event to the caller handed the events, if there is one.
    pub(crate) fn send(&self, event: Bytes) {
        let mut callers = self.lock();
        Self::send_in(&mut callers, event);
    }

    /// Relays a question that waits on the caller's answer, and keeps it, under `id`, to ask
    /// again of a caller that takes over, until [`Relay::answered`].
    pub(crate) fn ask(&self, id: String, event: Bytes) {
        let mut callers = self.lock();
        callers.asks.push((id, event.clone()));
        Self::send_in(&mut callers, event);
        drop(callers);
        self.changed.notify_waiters();
    }

    /// The question `id` was answered.
    pub(crate) fn answered(&self, id: &str) {
        self.lock().asks.retain(|(asked, _)| asked != id);
        self.changed.notify_waiters();
    }

    /// Whether the execution waits on the caller numbered `no`: it is handed the events, and
    /// a question waits for its answer. `None` once it is no longer handed the events.
    fn waits_on(&self, no: u64) -> Option<bool> {
        let callers = self.lock();
        let handed = callers.current.as_ref().is_some_and(|c| c.no == no);
        handed.then_some(!callers.asks.is_empty())
    }

    fn send_in(callers: &mut Callers, event: Bytes) {
        let Some(current) = &callers.current else {
            return;
        };
        match current.events.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::debug!("a caller does not read the events relayed to it; one dropped");
            }
            Err(mpsc::error::TrySendError::Closed(event)) => {
                callers.take_over();
                if let Some(next) = &callers.current {
                    let _ = next.events.try_send(event);
                }
            }
        }
    }

    fn detach(&self, no: u64) {
        let mut callers = self.lock();
        if callers.current.as_ref().is_some_and(|c| c.no == no) {
            callers.take_over();
        } else {
            callers.standby.retain(|listener| listener.no != no);
        }
        drop(callers);
        self.changed.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Callers> {
        self.callers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Attachment {
    /// The next event handed to this caller; `None` once the relay is gone.
    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        self.events.recv().await
    }

    /// An event already handed to this caller and not read yet, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Bytes> {
        self.events.try_recv().ok()
    }

    /// Where this caller is, for its deadline.
    pub(crate) fn hold(&self) -> Hold {
        Hold {
            relay: Arc::clone(&self.relay),
            no: self.no,
        }
    }

    /// Where this caller is, to detach it by later without keeping the relay alive.
    pub(crate) fn place(&self) -> Place {
        Place {
            relay: Arc::downgrade(&self.relay),
            no: self.no,
        }
    }
}

/// A caller's place on a relay that may have ended.
#[derive(Clone)]
pub(crate) struct Place {
    relay: std::sync::Weak<Relay>,
    no: u64,
}

impl Place {
    /// Whether its relay is still there.
    pub(crate) fn is_live(&self) -> bool {
        self.relay.strong_count() > 0
    }

    /// Detaches the caller now (its client gave up on the call), though its response goes
    /// on: the latest caller waiting takes over. Nothing, if the relay has ended.
    pub(crate) fn detach(&self) {
        if let Some(relay) = self.relay.upgrade() {
            relay.detach(self.no);
        }
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.relay.detach(self.no);
    }
}

/// Comes when `deadline` has passed and no question relayed to the caller at `hold` waits for
/// its answer. While one does, the execution waits on the caller, not the other way round:
/// the deadline is held back, and once the caller has answered it starts again, as long as it
/// was, so that the tool has the caller's answer to work with.
pub(crate) async fn past(mut deadline: Instant, hold: Option<&Hold>) {
    let span = deadline.saturating_duration_since(Instant::now());
    let Some(hold) = hold else {
        return tokio::time::sleep_until(deadline).await;
    };
    let changed = hold.relay.changed.notified();
    tokio::pin!(changed);
    loop {
        tokio::time::sleep_until(deadline).await;
        let mut held = false;
        loop {
            changed.as_mut().enable();
            match hold.relay.waits_on(hold.no) {
                Some(true) => held = true,
                Some(false) if held => break,
                // Not waited on, or no longer handed the events: the deadline stands.
                Some(false) | None => return,
            }
            changed.as_mut().await;
            changed.set(hold.relay.changed.notified());
        }
        deadline = Instant::now() + span;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn event(text: &'static str) -> Bytes {
        Bytes::from_static(text.as_bytes())
    }

    #[tokio::test]
    async fn a_duplicate_gets_no_events_until_the_caller_handed_them_goes_then_the_questions() {
        let relay = Arc::new(Relay::default());
        let mut first = relay.attach();
        let mut second = relay.attach();
        relay.send(event("progress"));
        relay.ask("7".to_owned(), event("question"));
        assert_eq!(first.next().await, Some(event("progress")));
        assert_eq!(first.next().await, Some(event("question")));
        drop(first);
        assert_eq!(second.next().await, Some(event("question")), "asked again");
        relay.send(event("later"));
        assert_eq!(second.next().await, Some(event("later")));
        relay.answered("7");
        drop(second);
        let mut third = relay.attach();
        relay.send(event("last"));
        assert_eq!(
            third.next().await,
            Some(event("last")),
            "nothing to ask again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_waits_while_a_question_waits_on_the_caller_then_starts_again() {
        let relay = Arc::new(Relay::default());
        let caller = relay.attach();
        let hold = caller.hold();
        relay.ask("1".to_owned(), event("question"));
        let deadline = Instant::now() + Duration::from_millis(100);
        let waiting = tokio::spawn(async move {
            past(deadline, Some(&hold)).await;
            Instant::now()
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!waiting.is_finished(), "held back");
        relay.answered("1");
        let answered = Instant::now();
        let past_at = waiting.await.unwrap();
        assert_eq!(past_at - answered, Duration::from_millis(100));
        // A caller no longer handed the events is not waited on.
        let hold = caller.hold();
        relay.ask("2".to_owned(), event("question"));
        caller.place().detach();
        let started = Instant::now();
        past(started + Duration::from_millis(100), Some(&hold)).await;
        assert_eq!(Instant::now() - started, Duration::from_millis(100));
    }
}

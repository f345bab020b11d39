//! `keep`: a plain layer that keeps outcomes, beside `digest`.
//!
//! It reads the body, canonicalises and hashes it, keys it by the session header, the path and
//! that hash, claims the key in one map under one lock, calls the handler, reads its answer,
//! keeps a 2xx answer (once the map holds `MAX_KEPT`, the oldest answer not asked for again
//! since it last came round goes, a second chance as a clock cache gives) and gives the key
//! back otherwise, and answers with the key in `idempotency-intent`. A repeat is given the kept
//! answer; one that comes while the first call runs yields to the runtime until that call ends,
//! then is given its answer, or makes the call itself if it was given back (and is refused with
//! 409 after `MAX_TURNS`). It has none of what makes this crate's layer safe to deploy (no
//! lease, no deadline, no waking of waiters, no byte budget or per-scope share, no failure
//! records, no metrics, no answer text for the model): it is here only so that a run sets this
//! crate's layer beside a plain one over the same HTTP path. Its own map, hashing and
//! middleware cost about what this crate's engine and store do (`BENCHMARKS.md`), so it is not
//! a floor under the layer.

use std::collections::hash_map::Entry as Slot;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// Answers kept at most: about as many as this crate's memory store keeps for one session at
/// its default budget and share, so that both evict under the first-execution load.
const MAX_KEPT: usize = 75_000;

/// The largest request or answer body read.
const MAX_BODY: usize = 1 << 20;

/// Turns a repeat yields for while the first call of its key runs, before it is refused.
const MAX_TURNS: u32 = 100_000;

type Key = [u8; 32];

/// A kept answer: its status, headers and body.
struct Kept {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// A claimed key's answer, once there is one, whether it was asked for again since it last
/// came round to be dropped, and which claim of the key it is.
struct Entry {
    kept: Option<Kept>,
    asked_again: bool,
    claim: u64,
}

/// The keys claimed, with their answers, and the order they come round in to be dropped: each
/// key with the number of the claim that queued it, so that a copy left by a key given back
/// and claimed again is told apart from the new claim's.
#[derive(Default)]
pub struct Table {
    answers: HashMap<Key, Entry>,
    order: VecDeque<(Key, u64)>,
    claims: u64,
}

/// What a claim found.
enum Claim {
    /// The key is this caller's to run, under this claim's number.
    New(u64),
    Running,
    Kept(Response),
}

impl Table {
    /// Claims `key`: its kept answer, word that it runs, or the key itself.
    fn claim(&mut self, key: Key) -> Claim {
        match self.answers.get_mut(&key) {
            Some(Entry {
                kept: Some(kept),
                asked_again,
                ..
            }) => {
                *asked_again = true;
                let mut response = Response::new(Body::from(kept.body.clone()));
                *response.status_mut() = kept.status;
                *response.headers_mut() = kept.headers.clone();
                Claim::Kept(response)
            }
            Some(Entry { kept: None, .. }) => Claim::Running,
            None => {
                if self.answers.len() >= MAX_KEPT {
                    self.drop_one();
                }
                self.claims += 1;
                let entry = Entry {
                    kept: None,
                    asked_again: false,
                    claim: self.claims,
                };
                self.answers.insert(key, entry);
                self.order.push_back((key, self.claims));
                Claim::New(self.claims)
            }
        }
    }

    /// Drops the oldest kept answer not asked for again since it last came round. One that
    /// was asked for, and a call still running, go to the back; a copy whose claim was given
    /// back is let go. One pass over the order at most, so this ends even if every key runs.
    fn drop_one(&mut self) {
        for _ in 0..self.order.len() {
            let Some((oldest, claim)) = self.order.pop_front() else {
                return;
            };
            match self.answers.get_mut(&oldest) {
                Some(entry) if entry.claim != claim => {}
                Some(entry) if entry.asked_again || entry.kept.is_none() => {
                    entry.asked_again = false;
                    self.order.push_back((oldest, claim));
                }
                Some(_) => {
                    self.answers.remove(&oldest);
                    return;
                }
                None => {}
            }
        }
    }

    /// Ends claim `claim` of `key`: keeps its answer, or gives the key back (`None`). A claim
    /// dropped meanwhile, or superseded, is left as it is.
    fn end(&mut self, key: Key, claim: u64, kept: Option<Kept>) {
        let Slot::Occupied(mut slot) = self.answers.entry(key) else {
            return;
        };
        if slot.get().claim != claim {
            return;
        }
        match kept {
            Some(kept) => slot.get_mut().kept = Some(kept),
            None => {
                slot.remove();
            }
        }
    }
}

/// A claim being run, ended when it is dropped: with its answer if one was set, else by giving
/// the key back, so that the repeats of a call dropped midway do not wait on it.
struct Running {
    table: Shared,
    key: Key,
    claim: u64,
    kept: Option<Kept>,
}

impl Drop for Running {
    fn drop(&mut self) {
        lock(&self.table).end(self.key, self.claim, self.kept.take());
    }
}

/// The map every request of one app shares.
pub type Shared = Arc<Mutex<Table>>;

fn lock(table: &Shared) -> std::sync::MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// SHA-256 of the session, the path and the body's canonical hash, each behind its length.
fn key_of(session: &[u8], path: &str, body_hash: &[u8; 32]) -> Key {
    let mut hasher = Sha256::new();
    for part in [session, path.as_bytes(), body_hash] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// The middleware: see the module's documentation.
pub async fn keep(State(table): State<Shared>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let Ok(body_hash) = tower_idempotency::canonical::canonical_sha256(&bytes) else {
        return StatusCode::UNPROCESSABLE_ENTITY.into_response();
    };
    let session = parts
        .headers
        .get(tower_idempotency::DEFAULT_SCOPE_HEADER)
        .map_or(&b""[..], HeaderValue::as_bytes);
    let key = key_of(session, parts.uri.path(), &body_hash);
    let mut turns = 0;
    let claim = loop {
        let claimed = lock(&table).claim(key);
        match claimed {
            Claim::Kept(response) => return response,
            Claim::Running if turns < MAX_TURNS => {
                turns += 1;
                tokio::task::yield_now().await;
            }
            Claim::Running => return StatusCode::CONFLICT.into_response(),
            Claim::New(claim) => break claim,
        }
    };
    let mut running = Running {
        table,
        key,
        claim,
        kept: None,
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let (mut head, body) = response.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let intent = tower_idempotency::IntentKey::from_bytes(key).to_hex();
    if let Ok(value) = HeaderValue::from_str(&intent) {
        head.headers.insert(tower_idempotency::INTENT_HEADER, value);
    }
    running.kept = head.status.is_success().then(|| Kept {
        status: head.status,
        headers: head.headers.clone(),
        body: body.clone(),
    });
    drop(running);
    Response::from_parts(head, Body::from(body))
}

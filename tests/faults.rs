//! A store that answers slowly, every call near a timeout: still one execution per intent,
//! and every caller gets the result or `in_progress`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use support::start_in_memory;
use tower_idempotency::key::IntentKey;
use tower_idempotency::store::{
    Claim, ClaimRequest, Entry, Fence, MemoryStore, OwnerToken, Record, Store, StoreError,
    Tombstone,
};
use tower_idempotency::IdempotencyLayer;

/// A real memory store behind a slow link: every call waits before it is made.
struct SlowStore {
    inner: MemoryStore,
    delay: Duration,
}

impl SlowStore {
    /// The way to the store.
    async fn link(&self) {
        tokio::time::sleep(self.delay).await;
    }
}

impl Store for SlowStore {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        self.link().await;
        self.inner.claim(key, request).await
    }
    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        self.link().await;
        self.inner.complete(key, token, record, retention).await
    }
    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.link().await;
        self.inner.release(key, token, tombstone, ttl).await
    }
    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.link().await;
        self.inner.extend(key, token, lease).await
    }
    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        self.link().await;
        self.inner.get(key).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_still_runs_each_intent_once() {
    let store = SlowStore {
        inner: MemoryStore::new(),
        delay: Duration::from_millis(150),
    };
    let layer = IdempotencyLayer::with_store(store)
        .deadline(Duration::from_millis(400))
        .lease(Duration::from_millis(300));
    let executions = layer.detached();
    let (client, counts) = start_in_memory(layer);
    let calls = (0..30).map(|i| {
        let client = client.clone();
        let body = format!(r#"{{"id":{},"delay_ms":200}}"#, i % 3);
        tokio::spawn(async move { client.post("/tools/intent", "s", &body).await })
    });
    for answer in futures_util::future::join_all(calls).await {
        let answer = answer.unwrap();
        assert!(
            answer.status == StatusCode::OK || answer.status == StatusCode::ACCEPTED,
            "{}",
            answer.status
        );
    }
    executions.wait().await;
    for id in 0..3 {
        assert_eq!(
            counts.get(&format!("intent:{id}")),
            1,
            "intent {id} ran once"
        );
    }
}

mod faults_in_user_code_and_stores {
    use std::time::{Duration, Instant};

    use axum::http::StatusCode;
    use tower_idempotency::store::MemoryStore;
    use tower_idempotency::{IdempotencyLayer, Verdict};

    use crate::support::faulty::{Call, Fault, FaultyStore, Plan};
    use crate::support::{start, start_in_memory, tools, Client, Counts};

    fn always(call: Call, fault: Fault) -> Option<Plan> {
        Some(Plan {
            call,
            ordinal: 0,
            fault,
            every: true,
        })
    }

    #[tokio::test]
    async fn a_panic_in_the_scope_function_is_answered_and_nothing_runs() {
        let layer = IdempotencyLayer::new().scope_fn(|_| panic!("a bug in the scope function"));
        let (client, counts) = start(layer).await;
        let answer = client.post("/tools/echo", "s", "{}").await;
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(answer.json()["outcome"], "not_executed");
        assert_eq!(answer.json()["retryable"], false);
        assert_eq!(counts.get("echo"), 0);
        // The process lives: the next request is answered too.
        let again = client.post("/tools/echo", "s", "{}").await;
        assert_eq!(again.status, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn a_panic_in_normalize_is_answered_and_nothing_runs() {
        let layer = IdempotencyLayer::new().normalize(|_| panic!("a bug in normalize"));
        let (client, counts) = start(layer).await;
        let answer = client.post("/tools/echo", "s", r#"{"a":1}"#).await;
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(answer.json()["outcome"], "not_executed");
        assert_eq!(counts.get("echo"), 0);
    }

    #[tokio::test]
    async fn a_panic_in_the_route_label_falls_back_to_the_default_label() {
        let layer = IdempotencyLayer::new().route_label(|_| panic!("a bug in route_label"));
        let (client, counts) = start(layer).await;
        let answer = client.post("/tools/echo", "s", "{}").await;
        assert_eq!(answer.status, StatusCode::CREATED);
        assert!(client.post("/tools/echo", "s", "{}").await.replayed());
        assert_eq!(counts.get("echo"), 1);
    }

    #[tokio::test]
    async fn a_panic_in_classify_after_the_tool_answered_is_never_run_again() {
        let layer =
            IdempotencyLayer::new().classify(|_: StatusCode, _: &http::HeaderMap| -> Verdict {
                panic!("a bug in classify")
            });
        let (client, counts) = start(layer).await;
        let first = client.post("/tools/echo", "s", "{}").await;
        assert_eq!(
            first.status,
            StatusCode::CREATED,
            "the caller gets the tool's answer"
        );
        let again = client.post("/tools/echo", "s", "{}").await;
        let body = again.json();
        assert_eq!(
            (&body["outcome"], &body["retryable"]),
            (&"unknown".into(), &false.into()),
            "{body}"
        );
        assert!(body["detail"]
            .as_str()
            .unwrap()
            .starts_with("This action ran"));
        assert_eq!(
            counts.get("echo"),
            1,
            "recorded as executed, never released"
        );
    }

    #[tokio::test]
    async fn a_panicking_store_fails_closed_and_the_process_lives() {
        let store = FaultyStore::new(MemoryStore::new(), always(Call::Claim, Fault::Panic));
        let (client, counts) = start(IdempotencyLayer::with_store(store)).await;
        for _ in 0..2 {
            let answer = client.post("/tools/echo", "s", "{}").await;
            assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(answer.json()["outcome"], "not_executed");
        }
        assert_eq!(counts.get("echo"), 0);
    }

    #[tokio::test]
    async fn a_hanging_store_cannot_hold_a_caller_past_its_deadline() {
        let hang = always(Call::Claim, Fault::Hang(Duration::from_secs(10)));
        let store = FaultyStore::new(MemoryStore::new(), hang);
        let layer = IdempotencyLayer::with_store(store).store_timeout(Duration::from_millis(300));
        let (client, counts) = start(layer).await;
        let asked = Instant::now();
        let answer = client.post("/tools/echo", "s", "{}").await;
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(counts.get("echo"), 0);
    }

    #[tokio::test]
    async fn when_the_completion_write_fails_the_caller_still_gets_the_response_at_once() {
        let store = FaultyStore::new(MemoryStore::new(), always(Call::Complete, Fault::Fail));
        let layer = IdempotencyLayer::with_store(store).deadline(Duration::from_secs(3));
        let (client, counts) = start(layer).await;
        let asked = Instant::now();
        let first = client.post("/tools/echo", "s", "{}").await;
        assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{:?}",
            asked.elapsed()
        );
        // The write is retried in the background; a repeat meanwhile is replayed from memory.
        let again = client.post("/tools/echo", "s", "{}").await;
        assert!(again.replayed(), "{} {:?}", again.status, again.body);
        assert_eq!(counts.get("echo"), 1);
    }

    #[tokio::test]
    async fn when_the_release_write_fails_the_caller_still_gets_the_failure_at_once() {
        let store = FaultyStore::new(MemoryStore::new(), always(Call::Release, Fault::Fail));
        let layer = IdempotencyLayer::with_store(store).deadline(Duration::from_secs(3));
        let (client, counts) = start(layer).await;
        let asked = Instant::now();
        let failed = client.post("/tools/status/503", "s", "{}").await;
        assert_eq!(
            failed.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{:?}",
            failed.body
        );
        assert!(
            asked.elapsed() < Duration::from_millis(500),
            "{:?}",
            asked.elapsed()
        );
        // A repeat meanwhile is told the attempt failed, never that it still runs.
        let again = client.post("/tools/status/503", "s", "{}").await;
        assert_ne!(again.status, StatusCode::ACCEPTED, "{:?}", again.body);
        assert_eq!(counts.get("status"), 1);
    }

    #[tokio::test]
    async fn a_repeat_while_the_key_is_not_yet_freed_is_told_when_calling_again_runs_it() {
        let store = FaultyStore::new(MemoryStore::new(), always(Call::Release, Fault::Fail));
        let layer = IdempotencyLayer::with_store(store)
            .deadline(Duration::from_secs(3))
            .lease(Duration::from_secs(4));
        let (client, counts) = start(layer).await;
        let failed = client.post("/tools/status/503", "s", "{}").await;
        assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
        // The store refused the release: a repeat now does not run it, and is not told it
        // would; it is told the attempt failed and how long until a repeat runs it.
        let again = client.post("/tools/status/503", "s", "{}").await;
        assert_eq!(counts.get("status"), 1);
        let told = again.json();
        assert_eq!(told["outcome"], "failed", "{told}");
        assert_eq!(again.header("retry-after"), Some("4"));
        let detail = told["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("in 4 s will run it again"), "{detail}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_duplicate_waiting_on_another_instance_holds_no_execution_slot() {
        let store = MemoryStore::new();
        let other = IdempotencyLayer::with_store(store.clone());
        // This instance's calls to the store, counted.
        let store = FaultyStore::new(store, None);
        let calls = store.counter();
        let this = IdempotencyLayer::with_store(store).max_detached(1);
        let counts = Counts::default();
        let runs_it = Client::in_memory(tools(counts.clone()).layer(other));
        let waits = Client::in_memory(tools(counts.clone()).layer(this));
        let slow = r#"{"id":1,"delay_ms":800}"#;
        let running = tokio::spawn({
            let runs_it = runs_it.clone();
            async move { runs_it.post("/tools/intent", "s", slow).await }
        });
        counts.reached("intent:1", 1).await;
        let waiting = tokio::spawn({
            let waits = waits.clone();
            async move { waits.post("/tools/intent", "s", slow).await }
        });
        // Waiting: it reads the store for the other instance's outcome.
        calls.reached(Call::Get, 1).await;
        // This instance's one slot is free: the wait above runs nothing here.
        let other_intent = waits.post("/tools/intent", "s", r#"{"id":2}"#).await;
        assert_eq!(
            other_intent.status,
            StatusCode::OK,
            "{:?}",
            other_intent.body
        );
        assert!(waiting.await.unwrap().replayed());
        running.await.unwrap();
        assert_eq!((counts.get("intent:1"), counts.get("intent:2")), (1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_leaves_while_its_claim_is_out_leaves_no_lease_behind() {
        // The claim is taken at once and answered late; its caller gives up in between.
        let late = Plan {
            call: Call::Claim,
            ordinal: 0,
            fault: Fault::AnswerLate(Duration::from_millis(500)),
            every: false,
        };
        let store = FaultyStore::new(MemoryStore::new(), Some(late));
        let layer = IdempotencyLayer::with_store(store).deadline(Duration::from_secs(1));
        let (client, counts) = start_in_memory(layer);
        let patience = Duration::from_millis(100);
        let gone = client
            .post_giving_up("/tools/echo", "s", "{}", patience)
            .await;
        assert!(gone.is_err(), "the client gave up");
        tokio::time::sleep(Duration::from_millis(700)).await;
        // Nothing ran under the lease it left, and the lease was given back: the retry runs.
        let retry = client.post("/tools/echo", "s", "{}").await;
        assert_eq!(retry.status, StatusCode::CREATED, "{:?}", retry.body);
        assert!(!retry.replayed());
        assert_eq!(counts.get("echo"), 1);
    }
}

mod a_wait_elsewhere {
    use std::sync::Arc;
    use std::time::Duration;

    use axum::http::StatusCode;
    use bytes::Bytes;
    use tower_idempotency::key::{Fingerprint, IntentKey};
    use tower_idempotency::store::{
        Claim, ClaimRequest, Entry, Fence, KeptResponse, OwnerToken, Record, Store, StoreError,
        StoredResponse, Tombstone,
    };
    use tower_idempotency::IdempotencyLayer;

    use crate::support::start;

    /// Another instance runs the intent under this key; when it is done, the record it left
    /// is for other arguments (its key was reused by a third caller in between).
    struct RunElsewhereThenOtherPayload;

    impl Store for RunElsewhereThenOtherPayload {
        async fn claim(&self, _: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
            Ok(Claim::Running(request.running()))
        }
        async fn complete(
            &self,
            _: &IntentKey,
            _: &OwnerToken,
            _: Arc<Record>,
            _: Duration,
        ) -> Result<Fence, StoreError> {
            Ok(Fence::Lost)
        }
        async fn release(
            &self,
            _: &IntentKey,
            _: &OwnerToken,
            _: Arc<Tombstone>,
            _: Duration,
        ) -> Result<Fence, StoreError> {
            Ok(Fence::Lost)
        }
        async fn extend(
            &self,
            _: &IntentKey,
            _: &OwnerToken,
            _: Duration,
        ) -> Result<Fence, StoreError> {
            Ok(Fence::Lost)
        }
        async fn get(&self, _: &IntentKey) -> Result<Option<Entry>, StoreError> {
            let scope = tower_idempotency::key::ScopeHash::of(b"not this caller's");
            let body = Bytes::from_static(b"someone else's result");
            let response = StoredResponse::new(StatusCode::OK, Default::default(), body);
            Ok(Some(Entry::Completed(Arc::new(Record::new(
                scope,
                Fingerprint::from_bytes(&[b'J'; 33]).unwrap(),
                1,
                2,
                u64::MAX,
                KeptResponse::Full(response),
            )))))
        }
    }

    #[tokio::test]
    async fn an_explicit_key_is_checked_again_when_the_wait_elsewhere_ends() {
        let layer = IdempotencyLayer::with_store(RunElsewhereThenOtherPayload)
            .idempotency_key_header()
            .deadline(Duration::from_secs(2));
        let (client, counts) = start(layer).await;
        let answer = client
            .post_with(
                "/tools/echo",
                &[
                    ("x-session-id", "s"),
                    ("content-type", "application/json"),
                    ("idempotency-key", "k-9"),
                ],
                r#"{"amount":1}"#,
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{:?}",
            answer.body
        );
        assert_ne!(&answer.body[..], b"someone else's result");
        assert_eq!(counts.get("echo"), 0);
    }
}

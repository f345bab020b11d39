//! Many gateway instances, one Redis (or one Redis Cluster): every guarantee of the core holds
//! across instances. Servers are real `redis-server` processes the tests start themselves.
#![cfg(feature = "redis")]

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use support::gateway;
use support::process::eventually;
use support::redis_server::{RedisCluster, RedisServer};
use support::{serve, tools, Answer, Client, Counts};
use tower_idempotency::key::{Fingerprint, IntentKey, ScopeHash};
use tower_idempotency::store::{
    Claim, ClaimRequest, Entry, Fence, KeptResponse, OwnerToken, Record, RedisStore, Store,
    StoredResponse, TieredStore,
};
use tower_idempotency::IdempotencyLayer;

type Tiered = TieredStore<RedisStore>;

/// One gateway instance: its own layer and connection, sharing Redis and the tools' counts.
async fn instance(
    store: Tiered,
    counts: &Counts,
    configure: impl FnOnce(IdempotencyLayer<Tiered>) -> IdempotencyLayer<Tiered>,
) -> Client {
    let layer = configure(IdempotencyLayer::with_store(store));
    Client::new(serve(tools(counts.clone()).layer(layer)).await)
}

async fn single(server: &RedisServer) -> Tiered {
    RedisStore::connect(&server.url()).await.unwrap().tiered()
}

async fn cluster(cluster: &RedisCluster) -> Tiered {
    RedisStore::connect_cluster(&cluster.urls())
        .await
        .unwrap()
        .tiered()
}

/// 200 identical calls spread over the instances, at once.
async fn hammer(instances: &[Client], body: &'static str) -> Vec<Answer> {
    let calls = (0..200).map(|i| {
        let client = instances[i % instances.len()].clone();
        tokio::spawn(async move { client.post("/tools/echo", "s", body).await })
    });
    futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

fn assert_one_result(answers: &[Answer]) {
    let mut bodies = HashSet::new();
    for answer in answers {
        match answer.status {
            StatusCode::CREATED => {
                bodies.insert(answer.body.clone());
            }
            StatusCode::ACCEPTED => assert_eq!(answer.json()["outcome"], "in_progress"),
            other => panic!("unexpected {other}: {:?}", answer.body),
        }
    }
    assert_eq!(
        bodies.len(),
        1,
        "every caller that got the result got the same one"
    );
}

async fn two_hundred_calls_over_two_instances_execute_once(a: Tiered, b: Tiered) {
    let counts = Counts::default();
    let instances = [
        instance(a, &counts, |l| l).await,
        instance(b, &counts, |l| l).await,
    ];
    let answers = hammer(&instances, r#"{"delay_ms":300}"#).await;
    assert_eq!(counts.get("echo"), 1);
    assert_one_result(&answers);
}

async fn replays_and_status_cross_instances(a: Tiered, b: Tiered) {
    let counts = Counts::default();
    let a = instance(a, &counts, |l| l.deadline(Duration::from_millis(100))).await;
    let b = instance(b, &counts, |l| l).await;
    let first = a.post("/tools/echo", "s", r#"{"delay_ms":600}"#).await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let url = format!("/_idempotency/{}", first.intent());
    let running = b.get(&url, Some("s")).await;
    assert_eq!(
        running.status,
        StatusCode::ACCEPTED,
        "B sees A's execution running"
    );
    assert_eq!(
        b.get(&url, Some("other")).await.status,
        StatusCode::NOT_FOUND
    );
    // A duplicate on B waits for A's execution and gets its result.
    let waited = b.post("/tools/echo", "s", r#"{"delay_ms":600}"#).await;
    assert_eq!(waited.status, StatusCode::CREATED);
    assert!(waited.replayed());
    let status = b.get(&url, Some("s")).await;
    assert_eq!(status.body, waited.body);
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_redis_run_200_identical_calls_once() {
    let server = RedisServer::start();
    two_hundred_calls_over_two_instances_execute_once(single(&server).await, single(&server).await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_answers_duplicates_and_status_on_one_redis() {
    let server = RedisServer::start();
    replays_and_status_cross_instances(single(&server).await, single(&server).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_a_cluster_run_200_identical_calls_once() {
    let nodes = RedisCluster::start();
    two_hundred_calls_over_two_instances_execute_once(cluster(&nodes).await, cluster(&nodes).await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_answers_duplicates_and_status_on_a_cluster() {
    let nodes = RedisCluster::start();
    replays_and_status_cross_instances(cluster(&nodes).await, cluster(&nodes).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intents_spread_over_every_cluster_node() {
    let nodes = RedisCluster::start();
    let counts = Counts::default();
    let client = instance(cluster(&nodes).await, &counts, |l| l).await;
    for n in 0..30 {
        let body = format!(r#"{{"n":{n}}}"#);
        assert_eq!(
            client.post("/tools/echo", "s", &body).await.status,
            StatusCode::CREATED
        );
        assert!(client.post("/tools/echo", "s", &body).await.replayed());
    }
    assert_eq!(counts.get("echo"), 30);
    for node in &nodes.nodes {
        let keys = support::redis_server::command(node.port, "DBSIZE").unwrap();
        assert_ne!(keys.trim(), ":0", "node {} holds some intents", node.port);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_past_the_clocks_reach_keep_records_and_failures_as_long_as_redis_can() {
    let server = RedisServer::start();
    let counts = Counts::default();
    let forever = |layer: IdempotencyLayer<Tiered>| {
        layer
            .retention(Duration::MAX)
            .lease(Duration::MAX)
            .failure_ttl(Duration::MAX)
    };
    let a = instance(single(&server).await, &counts, forever).await;
    let b = instance(single(&server).await, &counts, forever).await;
    support::assert_replayed_and_failure_shown(&a, &b, &counts).await;
}

#[tokio::test]
async fn round_trips_are_two_per_execution_one_per_remote_replay_none_per_local_replay() {
    let server = RedisServer::start();
    let counts = Counts::default();
    let a = instance(single(&server).await, &counts, |l| l).await;
    let b = instance(single(&server).await, &counts, |l| l).await;
    let mut monitor = server.monitor();
    let mut evalsha_before = server.evalsha_calls();
    let mut round_trips = || {
        let commands = monitor.client_commands();
        assert!(
            commands.iter().all(|c| c.contains("\"EVALSHA\"")),
            "{commands:?}"
        );
        // INFO commandstats agrees: every round trip is one script call.
        let evalsha = server.evalsha_calls();
        assert_eq!(evalsha - evalsha_before, commands.len() as u64);
        evalsha_before = evalsha;
        commands.len()
    };
    a.post("/tools/echo", "s", r#"{"x":1}"#).await;
    assert_eq!(round_trips(), 2, "a first execution: claim and complete");
    assert!(b.post("/tools/echo", "s", r#"{"x":1}"#).await.replayed());
    assert_eq!(
        round_trips(),
        1,
        "a replay from another instance: one claim"
    );
    assert!(a.post("/tools/echo", "s", r#"{"x":1}"#).await.replayed());
    assert!(b.post("/tools/echo", "s", r#"{"x":1}"#).await.replayed());
    assert_eq!(
        round_trips(),
        0,
        "replays each instance has seen cost nothing"
    );
    assert_eq!(counts.get("echo"), 1);
}

fn claim_request(lease: Duration) -> ClaimRequest {
    ClaimRequest::new(
        OwnerToken::generate(),
        lease,
        ScopeHash::of(b"s"),
        ScopeHash::of(b"s"),
        Fingerprint::from_bytes(&[b'J'; 33]).unwrap(),
        1,
    )
}

fn record(body: &'static str) -> Arc<Record> {
    let response = StoredResponse::new(StatusCode::OK, Default::default(), body.into());
    Arc::new(Record::new(
        ScopeHash::of(b"s"),
        Fingerprint::from_bytes(&[b'J'; 33]).unwrap(),
        1,
        2,
        u64::MAX,
        KeptResponse::Full(response),
    ))
}

#[tokio::test]
async fn a_worker_that_lost_its_lease_cannot_overwrite_the_new_owner() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let key = IntentKey::from_bytes([9; 32]);
    let Claim::Acquired(stale) = store
        .claim(&key, &claim_request(Duration::from_millis(100)))
        .await
        .unwrap()
    else {
        panic!("the first claim acquires")
    };
    // A running entry's lease is its key's time to live in Redis.
    eventually("the lease lapsed", Duration::from_secs(10), || async {
        store.get(&key).await.unwrap().is_none().then_some(())
    })
    .await;
    let Claim::Acquired(owner) = store
        .claim(&key, &claim_request(Duration::from_secs(30)))
        .await
        .unwrap()
    else {
        panic!("a lapsed lease is taken over")
    };
    let retention = Duration::from_secs(60);
    assert_eq!(
        store
            .extend(&key, &stale, Duration::from_secs(30))
            .await
            .unwrap(),
        Fence::Lost
    );
    assert_eq!(
        store
            .complete(&key, &stale, record("stale"), retention)
            .await
            .unwrap(),
        Fence::Lost
    );
    assert!(matches!(
        store.get(&key).await.unwrap(),
        Some(Entry::Running(_))
    ));
    assert_eq!(
        store
            .complete(&key, &owner, record("owner"), retention)
            .await
            .unwrap(),
        Fence::Held
    );
    let Some(Entry::Completed(kept)) = store.get(&key).await.unwrap() else {
        panic!("the owner's record is kept")
    };
    let KeptResponse::Full(response) = &kept.response else {
        panic!()
    };
    assert_eq!(&response.body[..], b"owner");
    // A completion written twice (a lost reply, retried) is still held, not fenced.
    assert_eq!(
        store
            .complete(&key, &owner, record("owner"), retention)
            .await
            .unwrap(),
        Fence::Held
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_refuses_new_calls_and_the_gateway_recovers_by_itself() {
    let mut server = RedisServer::start();
    let counts = Counts::default();
    let client = instance(single(&server).await, &counts, |l| {
        l.deadline(Duration::from_millis(100))
    })
    .await;

    // An execution is in flight when Redis dies.
    let in_flight = client
        .post("/tools/echo", "s", r#"{"delay_ms":1500}"#)
        .await;
    assert_eq!(in_flight.status, StatusCode::ACCEPTED);
    server.kill();

    let refused = client.post("/tools/echo", "s", r#"{"new":1}"#).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    let body = refused.json();
    assert_eq!(body["outcome"], "not_executed");
    assert_eq!(body["retryable"], true);
    assert_eq!(
        counts.get("echo"),
        1,
        "nothing ran while the store was down"
    );

    server.restart();
    eventually(
        "the gateway reconnecting by itself",
        Duration::from_secs(15),
        || async {
            let answer = client.post("/tools/echo", "s", r#"{"new":1}"#).await;
            (answer.status == StatusCode::CREATED).then_some(())
        },
    )
    .await;

    // The in-flight execution recorded its outcome once Redis was back.
    let url = format!("/_idempotency/{}", in_flight.intent());
    let outcome = eventually("the outcome recorded", Duration::from_secs(15), || async {
        let answer = client.get(&url, Some("s")).await;
        (answer.status == StatusCode::CREATED).then_some(answer)
    })
    .await;
    assert_eq!(outcome.json()["n"], 1);
    assert_eq!(counts.get("echo"), 2, "each intent ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owner_frees_the_intent_after_its_lease_and_another_instance_runs_it() {
    let server = RedisServer::start();
    gateway::assert_a_killed_owner_frees_the_intent_once(("REDIS_URL", server.url())).await;
}

/// Two `tool_gateway` processes, 20 intents each sent 10 times from both sides at once:
/// every intent runs once across both, and every caller gets the result or `in_progress`.
async fn hammer_two_gateways(env: &[(&'static str, String)]) -> [gateway::Gateway; 2] {
    let gateways = [gateway::start_owned(env), gateway::start_owned(env)];
    let calls = (0..200).map(|i| {
        let client = gateways[i % 2].client.clone();
        let body = format!(
            r#"{{"to":"u{}@example.com","subject":"s","body":"b","delay_ms":200}}"#,
            i % 20
        );
        tokio::spawn(async move { client.post("/tools/send_email", "agent", &body).await })
    });
    for answer in futures_util::future::join_all(calls).await {
        let answer = answer.unwrap();
        assert!(
            answer.status == StatusCode::OK || answer.status == StatusCode::ACCEPTED,
            "{}: {:?}",
            answer.status,
            answer.body
        );
    }
    gateways
}

async fn executions(gateways: &[gateway::Gateway]) -> u64 {
    let mut total = 0;
    for g in gateways {
        total += g.client.get("/stats", None).await.json()["send_email"]
            .as_u64()
            .unwrap();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateway_processes_on_one_redis_run_each_action_once_and_survive_an_outage() {
    let mut server = RedisServer::start();
    let gateways = hammer_two_gateways(&[("REDIS_URL", server.url())]).await;
    assert_eq!(executions(&gateways).await, 20);

    server.kill();
    let refused = gateways[0]
        .client
        .post(
            "/tools/send_email",
            "agent",
            r#"{"to":"new@example.com","subject":"s","body":"b"}"#,
        )
        .await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.json()["outcome"], "not_executed");
    assert_eq!(
        executions(&gateways).await,
        20,
        "nothing ran while Redis was down"
    );

    server.restart();
    // Each gateway reconnects on its own: the first call after Redis is back goes through.
    for g in &gateways {
        let answer = g
            .client
            .post(
                "/tools/send_email",
                "agent",
                r#"{"to":"new@example.com","subject":"s","body":"b"}"#,
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    }
    assert_eq!(
        executions(&gateways).await,
        21,
        "the new action ran once, on one gateway"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateway_processes_on_a_cluster_run_each_action_once() {
    let nodes = RedisCluster::start();
    let gateways = hammer_two_gateways(&[("REDIS_CLUSTER_URLS", nodes.urls().join(","))]).await;
    assert_eq!(executions(&gateways).await, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_mid_action_lets_it_finish_and_record_so_the_other_instance_replays_it() {
    let server = RedisServer::start();
    let env = [
        ("REDIS_URL", server.url()),
        ("DEADLINE_MS", "200".to_owned()),
        ("LEASE_MS", "600".to_owned()),
    ];
    let mut first = gateway::start_owned(&env);
    let second = gateway::start_owned(&env);
    let report = r#"{"topic":"q3","seconds":1.5}"#;
    let running = first
        .client
        .post("/tools/generate_report", "s", report)
        .await;
    assert_eq!(
        running.status,
        StatusCode::ACCEPTED,
        "still running at the deadline"
    );
    let stats = first.client.get("/stats", None).await.json();
    assert_eq!(
        stats["generate_report"], 1,
        "the action started on the first instance"
    );

    // A rolling deploy stops the first instance while the action runs.
    let stopped_at = std::time::Instant::now();
    first.terminate();
    assert!(
        first.exited_within(Duration::from_secs(10)),
        "the process exits once the action is done"
    );
    assert!(
        stopped_at.elapsed() >= Duration::from_millis(1000),
        "it waited for the action to finish: {:?}",
        stopped_at.elapsed()
    );
    // Well past the lease: had the record not been written, the call would run again here.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let replay = second
        .client
        .post("/tools/generate_report", "s", report)
        .await;
    assert!(replay.replayed(), "{} {:?}", replay.status, replay.body);
    let stats = second.client.get("/stats", None).await.json();
    assert_eq!(stats["generate_report"], 0, "never run again");
}

#[tokio::test]
async fn a_claim_whose_reply_was_lost_is_given_back_by_its_token() {
    let server = RedisServer::start();
    // One connection claims and "loses" the reply; the layer's store never saw it succeed.
    let lost_reply = RedisStore::connect(&server.url()).await.unwrap();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let key = IntentKey::from_bytes([11; 32]);
    let request = claim_request(Duration::from_secs(30));
    assert!(matches!(
        lost_reply.claim(&key, &request).await.unwrap(),
        Claim::Acquired(_)
    ));
    assert_eq!(
        store.abandon(&key, &request.token).await.unwrap(),
        Fence::Held,
        "the lease that token took is given back"
    );
    assert!(matches!(
        store
            .claim(&key, &claim_request(Duration::from_secs(30)))
            .await
            .unwrap(),
        Claim::Acquired(_)
    ));
    // Another token's lease is never given back.
    assert_eq!(
        store.abandon(&key, &request.token).await.unwrap(),
        Fence::Lost
    );
}

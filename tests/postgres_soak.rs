//! A chaos soak of two instances of the `orders` example in transactional mode on one
//! PostgreSQL: unique orders, each sent as concurrent duplicates spread over both instances,
//! while the database is killed (SIGKILL) at random moments and started again, the instances
//! are stopped with SIGTERM and started again, and a relay between the instances and the
//! database breaks connections as an order's INSERT or a COMMIT passes, before the database
//! gets it or after it answered. No intent may have two orders, two successes of one intent
//! may not differ, and every order answered as created is in the table and replayed when it
//! is asked for again. `SOAK_SECONDS` sets the length (25 s by default), `SOAK_SEED` the seed.
#![cfg(feature = "postgres")]

mod support;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use support::gateway::{start_example, Gateway};
use support::postgres_server::PostgresServer;
use support::relay::{Cut, Relay};
use support::soak::{self, Ledger, Random, Repeat};
use support::{Answer, Client};

/// Intent `id`'s order: its own item, and a wait in its open transaction that differs from
/// one intent to the next, so that faults land before, during and after executions.
fn order(id: u64) -> String {
    let delay = (id % 4) * 40;
    format!(r#"{{"item":"soak-{id}","delay_ms":{delay}}}"#)
}

async fn send(base: String, id: u64) -> Result<Answer, String> {
    let client = Client::new(base);
    let request = client
        .http
        .post(format!("{}/orders", client.base))
        .header("content-type", "application/json")
        .header("x-session-id", "soak")
        .body(order(id));
    client.try_send(request).await
}

/// The example on the database behind `relay`, with short leases, so that an intent whose
/// owner died is free again within the soak.
fn start_orders(relay: u16) -> Gateway {
    let url = format!("postgres://postgres@127.0.0.1:{relay}/postgres");
    start_example(
        "orders",
        &[
            ("DATABASE_URL", url.as_str()),
            ("DEADLINE_MS", "2000"),
            ("LEASE_MS", "3000"),
            ("SHUTDOWN_GRACE_MS", "10000"),
        ],
    )
}

/// The relay's triggers: an order's INSERT and a COMMIT, each cut before and after.
const CUTS: [(&[u8], Cut); 4] = [
    (b"INSERT INTO orders", Cut::Before),
    (b"INSERT INTO orders", Cut::After),
    (b"COMMIT", Cut::Before),
    (b"COMMIT", Cut::After),
];

#[derive(Default)]
struct Faults {
    database_kills: u64,
    restarts: u64,
    cuts_armed: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_orders_instances_on_a_postgres_killed_and_cut_at_random_create_each_order_at_most_once(
) {
    let seed = soak::seed();
    let length = soak::phase_length();
    println!("postgres soak, orders: seed {seed} (SOAK_SEED), {length:?} (SOAK_SECONDS)");
    // Acknowledged commits survive a kill: an order the database said it kept must be there.
    let mut database = PostgresServer::start_durable();
    let relay = Arc::new(Relay::cutting(database.port, &CUTS).await);
    let instances = vec![start_orders(relay.port), start_orders(relay.port)];
    let bases = Arc::new(RwLock::new(
        instances
            .iter()
            .map(|i| i.client.base.clone())
            .collect::<Vec<_>>(),
    ));
    let started = Instant::now();
    let until = started + length;

    // The faults, one at a time on a thread of their own: a kill of the database and its
    // restart, an instance stopped with SIGTERM and started again, or a connection cut at
    // an INSERT or a COMMIT.
    let faults = {
        let (bases, relay) = (Arc::clone(&bases), Arc::clone(&relay));
        std::thread::spawn(move || {
            let mut instances = instances;
            let mut random = Random::new(seed);
            let mut faults = Faults::default();
            loop {
                random.pause(300, 1500);
                if Instant::now() >= until {
                    break;
                }
                match random.below(3) {
                    0 => {
                        database.kill();
                        faults.database_kills += 1;
                        random.pause(0, 1000);
                        database.restart();
                    }
                    1 => {
                        let n = random.below(2) as usize;
                        instances[n].terminate();
                        assert!(
                            instances[n].exited_within(Duration::from_secs(30)),
                            "the instance stopped on SIGTERM"
                        );
                        instances[n] = start_orders(relay.port);
                        bases.write().unwrap()[n] = instances[n].client.base.clone();
                        faults.restarts += 1;
                    }
                    _ => {
                        relay.arm_nth(random.below(CUTS.len() as u64) as usize);
                        faults.cuts_armed += 1;
                        random.pause(200, 1000);
                        relay.disarm();
                    }
                }
            }
            (database, instances, faults)
        })
    };

    let ledger = Arc::new(Ledger::default());
    let call = {
        let bases = Arc::clone(&bases);
        move |id: u64, instance: usize| {
            let base = bases.read().unwrap()[instance].clone();
            send(base, id)
        }
    };
    let intents = soak::send_duplicates(Arc::clone(&ledger), seed, 6, 3, until, call).await;
    let (database, instances, faults) = tokio::task::spawn_blocking(move || faults.join())
        .await
        .unwrap()
        .expect("the faults ran");

    // Every order answered as created is replayed now, never created again.
    let kept = ledger.kept();
    let repeats = soak::repeat_kept(&kept, |id| {
        send(instances[(id % 2) as usize].client.base.clone(), id)
    })
    .await;

    let (db, connection) = tokio_postgres::connect(&database.url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test's database");
    tokio::spawn(connection);
    let rows = db
        .query("SELECT item, count(*) FROM orders GROUP BY item", &[])
        .await
        .unwrap();
    let orders: std::collections::HashMap<String, i64> =
        rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    let executions: i64 = orders.values().sum();
    let duplicated: Vec<_> = orders.iter().filter(|(_, n)| **n > 1).collect();
    // Lost: answered as created, and then not in the table or not replayed.
    let lost: Vec<_> = repeats
        .iter()
        .filter(|(id, again)| {
            *again != Repeat::Replayed || !orders.contains_key(&format!("soak-{id}"))
        })
        .collect();
    let differing = ledger.differing();
    println!(
        "postgres soak, orders: {} requests over {intents} intents in {:?}; {executions} orders; \
         {} successes ({} replayed), {} in progress, {} unanswered, others {}; \
         duplicates {}, differing {differing}, lost {}; faults: {} database kills, \
         {} instance restarts, {} cuts armed, {} connections cut",
        Ledger::count(&ledger.requests),
        started.elapsed(),
        Ledger::count(&ledger.succeeded),
        Ledger::count(&ledger.replayed),
        Ledger::count(&ledger.in_progress),
        Ledger::count(&ledger.unanswered),
        ledger.others(),
        duplicated.len(),
        lost.len(),
        faults.database_kills,
        faults.restarts,
        faults.cuts_armed,
        relay.cuts(),
    );
    assert!(
        duplicated.is_empty(),
        "intents with more than one order: {duplicated:?}"
    );
    assert_eq!(differing, 0, "successes of one intent that differ");
    assert!(
        lost.is_empty(),
        "created orders lost or not replayed: {lost:?}"
    );
    assert!(kept.len() > 20, "the soak created {} orders", kept.len());
    assert!(
        faults.database_kills + faults.restarts + relay.cuts() > 0,
        "faults were injected"
    );
}

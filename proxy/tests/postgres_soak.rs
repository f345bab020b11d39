//! A chaos soak of two proxies on one PostgreSQL in front of the Python tool server: unique
//! intents, each sent as concurrent duplicates spread over both proxies, while the database
//! is killed (SIGKILL) at random moments and started again, and the proxies are stopped with
//! SIGTERM and started again. No intent may run twice, two successes of one intent may not
//! differ, and an intent answered with a success is replayed when it is called again after.
//! `SOAK_SECONDS` sets the length (25 s by default), `SOAK_SEED` the faults' and calls' seed.

mod support;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use support::postgres_server::PostgresServer;
use support::soak::{self, Ledger, Random, Repeat};
use support::{answer, client, Answer, Proxy, Upstream};

/// The e-mail of intent `id`: its own address, and a short wait that differs from one intent
/// to the next, so that faults land before, during and after executions.
fn email(id: u64) -> String {
    let delay = (id % 4) * 40;
    format!(r#"{{"to":"n{id}@soak.test","subject":"soak","delay_ms":{delay}}}"#)
}

/// POSTs intent `id`'s e-mail to the proxy at `base`; the client's error where none answered.
async fn send(base: String, id: u64) -> Result<Answer, String> {
    let request = client()
        .post(format!("{base}/tools/send_email"))
        .header("content-type", "application/json")
        .header("x-session-id", "soak")
        .body(email(id));
    let response = request.send().await.map_err(|e| e.to_string())?;
    Ok(Answer::read(http::Response::from(response)).await)
}

/// Each address's sends, as the tool server counted them.
async fn sent(upstream: &str) -> serde_json::Map<String, serde_json::Value> {
    let counts = answer(client().get(format!("{upstream}/sent")))
        .await
        .json();
    counts.as_object().cloned().unwrap_or_default()
}

fn start_proxy(upstream: &str, database: &str) -> Proxy {
    Proxy::in_front_of(upstream, &["--postgres-url", database, "--deadline", "2s"])
}

#[derive(Default)]
struct Faults {
    database_kills: u64,
    proxy_restarts: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_a_postgres_killed_at_random_run_each_intent_at_most_once() {
    let seed = soak::seed();
    let length = soak::phase_length();
    println!("postgres soak, proxies: seed {seed} (SOAK_SEED), {length:?} (SOAK_SECONDS)");
    // Acknowledged commits survive a kill: a record the database said it kept must be there.
    let mut database = PostgresServer::start_durable();
    let upstream = Upstream::tools(0);
    let upstream_url = upstream.url();
    let database_url = database.url();
    let proxies = vec![
        start_proxy(&upstream_url, &database_url),
        start_proxy(&upstream_url, &database_url),
    ];
    let bases = Arc::new(RwLock::new(
        proxies.iter().map(|p| p.url.clone()).collect::<Vec<_>>(),
    ));
    let started = Instant::now();
    let until = started + length;

    // The faults, one at a time on a thread of their own: a kill of the database and its
    // restart, or a proxy stopped with SIGTERM and started again on a new port.
    let faults = {
        let (bases, upstream_url, database_url) = (
            Arc::clone(&bases),
            upstream_url.clone(),
            database_url.clone(),
        );
        std::thread::spawn(move || {
            let mut proxies = proxies;
            let mut random = Random::new(seed);
            let mut faults = Faults::default();
            loop {
                random.pause(300, 1500);
                if Instant::now() >= until {
                    break;
                }
                if random.below(2) == 0 {
                    database.kill();
                    faults.database_kills += 1;
                    random.pause(0, 1000);
                    database.restart();
                } else {
                    let n = random.below(2) as usize;
                    proxies[n].terminate();
                    let (code, stderr) = proxies[n].wait_exit(Duration::from_secs(40));
                    assert_eq!(code, Some(0), "the proxy stopped cleanly: {stderr}");
                    proxies[n] = start_proxy(&upstream_url, &database_url);
                    bases.write().unwrap()[n] = proxies[n].url.clone();
                    faults.proxy_restarts += 1;
                }
            }
            (database, proxies, faults)
        })
    };

    let ledger = Arc::new(Ledger::default());
    let call = {
        let bases = Arc::clone(&bases);
        move |id: u64, proxy: usize| {
            let base = bases.read().unwrap()[proxy].clone();
            send(base, id)
        }
    };
    let intents = soak::send_duplicates(Arc::clone(&ledger), seed, 6, 3, until, call).await;
    let (_database, proxies, faults) = tokio::task::spawn_blocking(move || faults.join())
        .await
        .unwrap()
        .expect("the faults ran");

    // Every intent answered with a success is replayed now, never run again.
    let kept = ledger.kept();
    let repeats =
        soak::repeat_kept(&kept, |id| send(proxies[(id % 2) as usize].url.clone(), id)).await;
    let lost: Vec<_> = repeats
        .iter()
        .filter(|(_, again)| *again != Repeat::Replayed)
        .collect();

    let counts = sent(&upstream_url).await;
    let executions: u64 = counts.values().filter_map(serde_json::Value::as_u64).sum();
    let duplicated: Vec<_> = counts
        .iter()
        .filter(|(_, n)| n.as_u64() > Some(1))
        .collect();
    let differing = ledger.differing();
    println!(
        "postgres soak, proxies: {} requests over {intents} intents in {:?}; {executions} executions; \
         {} successes ({} replayed), {} in progress, {} unanswered, others {}; \
         duplicates {}, differing {differing}, lost {}; faults: {} database kills, {} proxy restarts",
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
        faults.proxy_restarts,
    );
    assert!(
        duplicated.is_empty(),
        "intents run more than once: {duplicated:?}"
    );
    assert_eq!(differing, 0, "successes of one intent that differ");
    assert!(lost.is_empty(), "kept intents not replayed: {lost:?}");
    assert!(kept.len() > 20, "the soak kept {} intents", kept.len());
    assert!(
        faults.database_kills + faults.proxy_restarts > 0,
        "faults were injected"
    );
}

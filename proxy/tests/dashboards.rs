//! The dashboard queries and the alerts the docs give, evaluated by a real Prometheus (Debian's
//! package, started on a free port with a folder of its own) that scrapes proxies and the tool
//! gateway example while a test drives them through the events the queries and alerts read. A
//! query that names a series nobody exports returns nothing, and fails here; an alert that
//! misses the first event it is about fails here too.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::process::{eventually, lines, listening, wait_until};
use support::{client, free_port, post, Proxy, Upstream};

/// The queries of the docs' `promql` blocks, one a line, comments left out.
fn documented_queries() -> Vec<String> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/observability.md");
    let text = std::fs::read_to_string(&docs).expect("docs/observability.md");
    let mut queries = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        match line.trim() {
            "```promql" => inside = true,
            "```" => inside = false,
            query if inside && !query.is_empty() && !query.starts_with('#') => {
                queries.push(query.to_owned());
            }
            _ => {}
        }
    }
    queries
}

/// The Prometheus binary, or `None` outside CI where it is not installed (the test says so
/// and passes); under `CI=true` it must be there.
fn prometheus_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("prometheus"))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        let missing = "prometheus is not installed (bash .ci/test installs Debian's package)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{missing}");
        eprintln!("skipped: {missing}");
    }
    found
}

/// A Prometheus server scraping `targets` every second, stopped when dropped.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(binary: &Path, targets: &[String]) -> Self {
        Self::with_rules(binary, targets, "groups: []\n")
    }

    /// Like [`Prometheus::start`], evaluating the rule file `rules` every second.
    fn with_rules(binary: &Path, targets: &[String], rules: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let listed: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let rules_path = dir.path().join("rules.yml");
        std::fs::write(&rules_path, rules).unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: ['{}']\nscrape_configs:\n  - job_name: idempotency\n    static_configs:\n      - targets: [{}]\n",
            rules_path.display(),
            listed.join(", ")
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let url = format!("http://127.0.0.1:{port}");
        // Listening is enough: every query after is asked again until it can be answered.
        wait_until("prometheus listening", Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Self {
            child,
            url,
            _dir: dir,
        }
    }

    /// Waits until each of `targets` targets was scraped at least `at_least` times; the fewest
    /// scrapes of any.
    async fn scrapes(&self, targets: usize, at_least: u64) -> u64 {
        eventually("prometheus scraping", Duration::from_secs(30), || async {
            let counts = self
                .ready_query("count_over_time(up[5m]) and up == 1")
                .await?;
            let fewest = counts
                .iter()
                .filter_map(|sample| sample["value"][1].as_str()?.parse::<u64>().ok())
                .min()?;
            (counts.len() == targets && fewest >= at_least).then_some(fewest)
        })
        .await
    }

    /// The result vector of an instant query, once Prometheus answers queries: while it
    /// starts, it listens and answers 503 in plain text.
    async fn ready_query(&self, query: &str) -> Option<Vec<Value>> {
        let url = format!("{}/api/v1/query", self.url);
        let url = reqwest::Url::parse_with_params(&url, [("query", query)]).unwrap();
        let answer = client().get(url).send().await.ok()?;
        let body: Value = answer.json().await.ok()?;
        (body["status"] == "success").then(|| body["data"]["result"].as_array().cloned())?
    }

    /// The result vector of an instant query.
    async fn query(&self, query: &str) -> Vec<Value> {
        let url = format!("{}/api/v1/query", self.url);
        let url = reqwest::Url::parse_with_params(&url, [("query", query)]).unwrap();
        let answer = client().get(url).send().await.expect("prometheus answers");
        let body: Value = answer.json().await.expect("a JSON answer");
        assert_eq!(body["status"], "success", "{query}: {body}");
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tool gateway example (its contract checks `send_email`'s arguments), on a free port;
/// killed when dropped.
struct Gateway(Child, String);

impl Gateway {
    fn start() -> Self {
        let deps = std::env::current_exe().unwrap();
        let profile = deps.parent().unwrap().parent().unwrap();
        let binary = profile.join("examples").join("tool_gateway");
        let mut child = Command::new(&binary)
            .env("ADDR", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{}: built by cargo test --workspace: {e}", binary.display())
            });
        let stdout = lines(child.stdout.take().unwrap());
        let (base, _) = listening(&mut child, &stdout, "the tool gateway");
        Self(child, base)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One round of every event the queries read.
async fn events(enforcing: &str, observing: &str, gateway: &str, round: u32) {
    let email = format!(r#"{{"to":"ada@example.com","round":{round}}}"#);
    // Enforcing: an execution and its replay, a call past its deadline, a refusal.
    post(enforcing, "/tools/send_email", Some("s1"), &email).await;
    post(enforcing, "/tools/send_email", Some("s1"), &email).await;
    let slow = format!(r#"{{"to":"ada@example.com","round":{round},"delay_ms":400}}"#);
    let late = post(enforcing, "/tools/send_email", Some("s1"), &slow).await;
    assert_eq!(late.status, 202, "{late:?}");
    post(enforcing, "/tools/send_email", None, &email).await;
    // Observing: a first call, its repeats, a call without a scope.
    for _ in 0..3 {
        post(observing, "/tools/send_email", Some("s1"), &email).await;
    }
    post(observing, "/tools/send_email", None, &email).await;
    // The contract refuses arguments its schema does not allow.
    let invalid = r#"{"to":"not an address","subject":"s","body":"b"}"#;
    let refused = post(gateway, "/tools/send_email", Some("s1"), invalid).await;
    assert_eq!(refused.status, 422, "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_dashboard_query_returns_data_from_a_real_prometheus() {
    let queries = documented_queries();
    assert!(queries.len() >= 10, "the docs' queries: {queries:?}");
    let Some(binary) = prometheus_binary() else {
        return;
    };
    let upstream = Upstream::tools(0);
    let metrics = ["--metrics-listen", "127.0.0.1:0"];
    let enforcing = Proxy::in_front_of(
        &upstream.url(),
        &[&metrics[..], &["--deadline", "150ms"]].concat(),
    );
    let observing = Proxy::in_front_of(&upstream.url(), &[&metrics[..], &["--observe"]].concat());
    let gateway = Gateway::start();
    let address = |url: &str| url.trim_start_matches("http://").to_owned();
    let targets = [
        address(enforcing.metrics.as_deref().unwrap()),
        address(observing.metrics.as_deref().unwrap()),
        address(&gateway.1),
    ];
    let prometheus = Prometheus::start(&binary, &targets);
    // Two rounds, each followed by two scrapes of every target: the first round makes the
    // series, the second moves them, so that every rate has two samples to differ by.
    let mut scraped = prometheus.scrapes(targets.len(), 1).await;
    for round in 0..2 {
        events(&enforcing.url, &observing.url, &gateway.1, round).await;
        scraped = prometheus.scrapes(targets.len(), scraped + 2).await;
    }
    let mut empty = Vec::new();
    for query in &queries {
        let result = prometheus.query(query).await;
        let finite = result.iter().any(|sample| {
            sample["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(f64::is_finite)
        });
        if !finite {
            empty.push(format!("{query}\n    -> {result:?}"));
        }
    }
    assert!(
        empty.is_empty(),
        "documented queries with no data:\n{}",
        empty.join("\n")
    );
}

/// The alerts of docs/production.md's table: a name Prometheus accepts, and the expression.
fn documented_alerts() -> Vec<(String, String)> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/production.md");
    let text = std::fs::read_to_string(&docs).expect("docs/production.md");
    let alerts = &text[text.find("## Alerts").expect("an Alerts section")..];
    alerts
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let expression = cells.get(2)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((cells[1].replace(' ', "_"), expression.to_owned()))
        })
        .collect()
}

/// The names of the alerts firing now.
async fn firing(prometheus: &Prometheus) -> Vec<String> {
    let mut names: Vec<String> = prometheus
        .query(r#"ALERTS{alertstate="firing"}"#)
        .await
        .iter()
        .filter_map(|sample| sample["metric"]["alertname"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Waits until every alert of `names` fires, for at most `limit`.
async fn until_firing(prometheus: &Prometheus, names: &[&str], limit: Duration) {
    let what = format!("the alerts {names:?} all firing");
    eventually(&what, limit, || async {
        let fired = firing(prometheus).await;
        names
            .iter()
            .all(|name| fired.iter().any(|f| f == name))
            .then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_alert_fires_on_its_first_event() {
    let alerts = documented_alerts();
    assert!(alerts.len() >= 6, "the docs' alerts: {alerts:?}");
    let Some(binary) = prometheus_binary() else {
        return;
    };
    let mut redis = support::redis_server::RedisServer::start();
    let upstream = Upstream::tools(0);
    let metrics = ["--metrics-listen", "127.0.0.1:0"];
    let url = redis.url();
    // Two instances on one Redis, and one that runs calls unprotected when Redis is down.
    let shared = [&metrics[..], &["--redis-url", &url, "--deadline", "150ms"]].concat();
    let (first, second) = (
        Proxy::in_front_of(&upstream.url(), &shared),
        Proxy::in_front_of(&upstream.url(), &shared),
    );
    let open = support::config_file(&format!(
        "[store]\nredis_url = \"{url}\"\nfail_open = true\n"
    ));
    let open_path = open.path().to_str().unwrap();
    let fail_open = Proxy::in_front_of(
        &upstream.url(),
        &[&metrics[..], &["--config", open_path]].concat(),
    );
    // A memory store with room for a few records of one caller.
    let small = support::config_file("[store]\nmemory_max_bytes = 16384\n");
    let small_path = small.path().to_str().unwrap();
    let memory = Proxy::in_front_of(
        &upstream.url(),
        &[&metrics[..], &["--config", small_path]].concat(),
    );
    let proxies = [&first, &second, &fail_open, &memory];
    let targets: Vec<String> = proxies
        .iter()
        .map(|proxy| {
            proxy
                .metrics
                .as_deref()
                .unwrap()
                .trim_start_matches("http://")
                .to_owned()
        })
        .collect();
    let rules: String = alerts
        .iter()
        .map(|(name, expression)| format!("      - alert: {name}\n        expr: '{expression}'\n"))
        .collect();
    let prometheus = Prometheus::with_rules(
        &binary,
        &targets,
        &format!("groups:\n  - name: documented\n    rules:\n{rules}"),
    );

    // Each proxy meets the tool once, so that its operation's series exist; then two scrapes.
    for proxy in proxies {
        let sent = post(
            &proxy.url,
            "/tools/send_email",
            Some("s1"),
            r#"{"to":"ada@example.com"}"#,
        )
        .await;
        assert_eq!(sent.status, 200, "{sent:?}");
    }
    let scraped = prometheus.scrapes(targets.len(), 1).await;
    prometheus.scrapes(targets.len(), scraped + 2).await;
    // Before any event each alert's expression has its series, at 0, and none fires.
    for (name, expression) in &alerts {
        let series = expression.trim_end_matches(" > 0");
        let result = prometheus.query(series).await;
        let zero = |sample: &Value| sample["value"][1].as_str() == Some("0");
        assert!(
            !result.is_empty() && result.iter().all(zero),
            "{name}: {series} before any event -> {result:?}"
        );
    }
    assert_eq!(firing(&prometheus).await, Vec::<String>::new());

    // A completion fenced and a lease lost: the first instance runs a call past its first
    // renewal (a third of the 30 s lease), Redis loses its entry, and the second instance
    // claims the intent and runs it too.
    let slow = r#"{"to":"ada@example.com","delay_ms":10500}"#;
    let started = post(&first.url, "/tools/send_email", Some("s1"), slow).await;
    assert_eq!(started.status, 202, "{started:?}");
    support::redis_server::command(redis.port, "FLUSHALL").expect("FLUSHALL");
    let again = post(&second.url, "/tools/send_email", Some("s1"), slow).await;
    assert_eq!(again.status, 202, "{again:?}");
    // One caller's records past its share of the memory store: its oldest are evicted.
    for n in 0..24 {
        post(
            &memory.url,
            "/tools/send_email",
            Some("s1"),
            &format!(r#"{{"n":{n}}}"#),
        )
        .await;
    }
    let fenced = ["completions_fenced", "leases_lost", "records_evicted"];
    until_firing(&prometheus, &fenced, Duration::from_secs(60)).await;

    // Redis gone: the fail-open instance runs a call unprotected, and its store calls fail.
    redis.kill();
    let unprotected = post(
        &fail_open.url,
        "/tools/send_email",
        Some("s1"),
        r#"{"to":"bob@example.com"}"#,
    )
    .await;
    assert_eq!(unprotected.status, 200, "{unprotected:?}");
    let driven = [&fenced[..], &["unprotected_requests", "store_errors"]].concat();
    until_firing(&prometheus, &driven, Duration::from_secs(60)).await;
    // `completions_given_up` takes 10 minutes of refused writes: its series is checked at 0
    // above, and it is never driven here.
}

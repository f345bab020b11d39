//! What an adopter's first scrape shows: docs/observability.md's example, run as the program it
//! is (`examples/metrics.rs`), exports every series its table gives for the memory store at 0,
//! before any event.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use support::gateway::start_example;

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The page's first Rust block.
fn documented_example(page: &str) -> String {
    let start = page.find("```rust").expect("a Rust block");
    let code = &page[page[start..].find('\n').unwrap() + start + 1..];
    code[..code.find("```").unwrap()].to_owned()
}

/// One row of the page's metrics table: name, type, and when it is exported.
struct Row {
    name: String,
    kind: String,
    exported: String,
}

fn documented_series(page: &str) -> Vec<Row> {
    page.lines()
        .filter(|line| line.starts_with("| `idempotency_"))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            Row {
                name: cells[1].trim_matches('`').to_owned(),
                kind: cells[2].to_owned(),
                exported: cells[4].to_owned(),
            }
        })
        .collect()
}

/// Samples of a Prometheus text exposition: the name with its labels, and the value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

/// The samples of `row`'s series: a counter or a gauge by its name, a histogram by its
/// `_count`.
fn of<'a>(samples: &'a BTreeMap<String, f64>, row: &Row) -> Vec<(&'a String, f64)> {
    let name = match row.kind.as_str() {
        "histogram" => format!("{}_count", row.name),
        _ => row.name.clone(),
    };
    samples
        .iter()
        .filter(|(series, _)| {
            series
                .strip_prefix(name.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
        })
        .map(|(series, value)| (series, *value))
        .collect()
}

#[test]
fn the_page_shows_the_example_program_as_it_is() {
    let page = read("docs/observability.md");
    let program = read("examples/metrics.rs");
    // The program's own header says how to run it; the page says so in its words.
    let code = &program[program.find("\nuse ").expect("imports") + 1..];
    assert_eq!(documented_example(&page), code);
}

#[tokio::test]
async fn every_series_the_page_lists_for_the_memory_store_is_scraped_at_0_before_any_event() {
    let page = read("docs/observability.md");
    let rows: Vec<Row> = documented_series(&page)
        .into_iter()
        .filter(|row| ["layer", "operation", "memory store"].contains(&row.exported.as_str()))
        .collect();
    assert!(
        rows.len() >= 18,
        "the page's rows for the memory store: {}",
        rows.len()
    );
    let app = start_example("metrics", &[]);

    let first = samples(&String::from_utf8_lossy(
        &app.client.get("/metrics", None).await.body,
    ));
    let mut wrong = Vec::new();
    for row in &rows {
        let found = of(&first, row);
        if found.is_empty() {
            wrong.push(format!("{}: not exported", row.name));
        }
        for (series, value) in found {
            if value != 0.0 {
                wrong.push(format!("{series} = {value}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "before any request:\n{}",
        wrong.join("\n")
    );

    // An operation's series come with its first request: those of events it did not meet at 0.
    let sent = app
        .client
        .post("/tools/send_email", "s1", r#"{"to":"ada@example.com"}"#)
        .await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let after = samples(&String::from_utf8_lossy(
        &app.client.get("/metrics", None).await.body,
    ));
    let operation = r#"operation="POST /tools/send_email""#;
    let mut wrong = Vec::new();
    for row in rows.iter().filter(|row| row.exported == "operation") {
        let found: Vec<_> = of(&after, row)
            .into_iter()
            .filter(|(series, _)| series.contains(operation))
            .collect();
        if found.is_empty() {
            wrong.push(format!("{}: not exported for the operation", row.name));
        }
    }
    for name in [
        "idempotency_fenced_total",
        "idempotency_lease_lost_total",
        "idempotency_completions_abandoned_total",
        "idempotency_unprotected_total",
        "idempotency_coalesced_total",
        "idempotency_in_progress_total",
        "idempotency_releases_total",
        "idempotency_not_executed_total",
    ] {
        let row = rows
            .iter()
            .find(|row| row.name == name)
            .expect("a documented series");
        for (series, value) in of(&after, row) {
            if series.contains(operation) && value != 0.0 {
                wrong.push(format!("{series} = {value}"));
            }
        }
    }
    let executed = format!(r#"idempotency_executions_total{{{operation}}}"#);
    assert_eq!(after.get(&executed), Some(&1.0), "{executed}");
    assert!(
        wrong.is_empty(),
        "after the first request:\n{}",
        wrong.join("\n")
    );
}

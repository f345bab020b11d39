//! `idempotency-proxy inspect <intent>`: one intent's story, read from a running proxy's admin
//! API (`GET /admin/records/{intent}` on its metrics listener) and printed as a table.

use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::cli::Inspect;

/// How long the admin API has to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Prints the story of `args.intent`: 0 when shown, 1 when the API could not show it.
pub fn run(args: &Inspect) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("idempotency-proxy inspect: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(fetch(args)) {
        Ok(shown) => {
            print!("{}", table(&shown));
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("idempotency-proxy inspect: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The record as the admin API shows it, or why it could not be read.
async fn fetch(args: &Inspect) -> Result<Value, String> {
    let base = args.admin_url.trim_end_matches('/');
    let base = base.strip_suffix("/admin").unwrap_or(base);
    let url = format!("{base}/admin/records/{}", args.intent);
    let request = Request::get(&url)
        .header(
            header::AUTHORIZATION,
            format!("Bearer {}", args.admin_token),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|_| format!("{url} is not a URL the admin API can be asked at"))?;
    let client = Client::builder(TokioExecutor::new()).build_http();
    let asked = async {
        let response = client.request(request).await.map_err(|error| {
            format!("the admin API at {base} did not answer ({error}): is --admin-url the proxy's metrics listener?")
        })?;
        let status = response.status();
        let body = (response.into_body().collect().await)
            .map_err(|error| format!("the admin API's answer broke off: {error}"))?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    let (status, body) = tokio::time::timeout(TIMEOUT, asked)
        .await
        .map_err(|_| format!("the admin API at {base} did not answer within 10 s"))??;
    let shown: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match status {
        StatusCode::OK => Ok(shown),
        StatusCode::UNAUTHORIZED => Err("the admin API refused the token".to_owned()),
        _ => Err(match shown["error"].as_str() {
            Some(error) => format!("{error} ({status})"),
            None => format!("the admin API answered {status}"),
        }),
    }
}

/// The record's summary, then its story, one transition a row, oldest first.
fn table(shown: &Value) -> String {
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut out = String::new();
    out.push_str(&format!("intent     {}\n", text(&shown["intent"])));
    out.push_str(&format!("operation  {}\n", text(&shown["operation"])));
    let status = match text(&shown["status"]) {
        status if status.is_empty() => status,
        status => format!(" ({status})"),
    };
    out.push_str(&format!("outcome    {}{status}\n", text(&shown["outcome"])));
    let history = shown["history"].as_array().cloned().unwrap_or_default();
    if history.is_empty() {
        out.push_str("\nno story kept (a running call's is written when it ends)\n");
        return out;
    }
    let mut rows =
        vec![["TIME", "EVENT", "STATUS", "DURATION", "INSTANCE", "NOTE"].map(String::from)];
    for transition in &history {
        let at = transition["at_ms"].as_u64().map_or_else(String::new, |ms| {
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        });
        let duration = transition["duration_ms"]
            .as_u64()
            .map_or_else(String::new, |ms| format!("{ms} ms"));
        let note = match (&transition["note"], &transition["cause"]) {
            (Value::String(note), _) => note.clone(),
            (_, Value::String(cause)) => format!("cause: {cause}"),
            _ => String::new(),
        };
        rows.push([
            at,
            text(&transition["event"]),
            text(&transition["status"]),
            duration,
            text(&transition["instance"]),
            note,
        ]);
    }
    let mut widths = [0; 6];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    out.push('\n');
    for row in &rows {
        let cells: Vec<String> = (row.iter().zip(widths))
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_story_prints_one_aligned_row_a_transition_oldest_first() {
        let shown = serde_json::json!({
            "intent": "ab".repeat(32),
            "operation": "POST /tools/flaky",
            "outcome": "kept",
            "status": 200,
            "history": [
                {"at_ms": 0, "event": "claimed", "instance": "0a0b0c0d"},
                {"at_ms": 7, "event": "released", "instance": "0a0b0c0d",
                 "status": 503, "cause": "status", "duration_ms": 7},
                {"at_ms": 1500, "event": "resolved", "instance": "ffffffff",
                 "note": "INC-7"},
            ],
        });
        let printed = table(&shown);
        let lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines[2], "outcome    kept (200)");
        assert!(lines[4].starts_with("TIME "), "{printed}");
        assert_eq!(
            lines[5].split_whitespace().collect::<Vec<_>>(),
            ["1970-01-01T00:00:00.000Z", "claimed", "0a0b0c0d"]
        );
        assert_eq!(
            lines[6].split_whitespace().collect::<Vec<_>>(),
            [
                "1970-01-01T00:00:00.007Z",
                "released",
                "503",
                "7",
                "ms",
                "0a0b0c0d",
                "cause:",
                "status"
            ]
        );
        assert!(lines[7].ends_with("INC-7"), "{printed}");
        let event_at = |line: &str| line.find(" claimed").or(line.find(" released"));
        assert_eq!(
            event_at(lines[5]),
            event_at(lines[6]),
            "aligned:\n{printed}"
        );
    }
}

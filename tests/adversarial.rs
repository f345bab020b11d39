//! Hostile and broken input, each with the answer the client gets. None may crash the process,
//! grow memory without bound, or run the tool twice.

mod support;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use axum::http::StatusCode;
use support::{start, start_in_memory, Counts};
use tower_idempotency::IdempotencyLayer;

/// Sends raw bytes on a fresh connection, then reads until the server closes it.
async fn raw_http(base: &str, request: &[u8]) -> String {
    raw_http_then(base, request, false).await
}

/// Like [`raw_http`]; with `half_close`, the client also ends its side after sending.
async fn raw_http_then(base: &str, request: &[u8], half_close: bool) -> String {
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    if half_close {
        stream.shutdown().await.unwrap();
    }
    let mut reply = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply)).await;
    assert!(read.is_ok(), "the server answered and closed in time");
    String::from_utf8_lossy(&reply).into_owned()
}

#[tokio::test]
async fn nesting_100_000_levels_deep_runs_once_on_raw_bytes() {
    let (client, counts) = start(IdempotencyLayer::new().body_limit(1 << 20)).await;
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let first = client.post("/tools/raw", "s", &deep).await;
    assert_eq!(first.status, StatusCode::OK);
    let again = client.post("/tools/raw", "s", &deep).await;
    assert!(
        again.replayed(),
        "fingerprinted by its raw bytes, still one intent"
    );
    assert_eq!(counts.get("raw"), 1);
}

#[tokio::test]
async fn broken_json_is_never_merged_and_never_crashes() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let bodies: [&[u8]; 8] = [
        b"{\"to\":\"a\xff\xfeb\"}",     // invalid UTF-8 inside a string
        b"{\"to\":\"\\ud800\"}",        // a lone surrogate escape
        b"{\"to\":\"\\udc00\\ud800\"}", // reversed surrogates
        b"{\"a\":1,\"a\":2}",           // duplicate member names
        b"{\"a\":2,\"a\":1}",           // the same, the other way round
        b"{\"n\":1e400}",               // beyond the f64 range
        b"{\"n\":-1e400}",
        b"{\"unterminated\":",
    ];
    for body in bodies {
        let answer = client
            .post_with(
                "/tools/raw",
                &[("x-session-id", "s"), ("content-type", "application/json")],
                body.to_vec(),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{:?}",
            String::from_utf8_lossy(body)
        );
        assert!(
            !answer.replayed(),
            "{:?} must not be merged with another body",
            String::from_utf8_lossy(body)
        );
    }
    assert_eq!(counts.get("raw"), bodies.len());
}

#[tokio::test]
async fn extreme_numbers_keep_their_identity() {
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let thousands = format!("{{\"n\":{}}}", "7".repeat(5000));
    let thousands_plus_one = format!("{{\"n\":{}8}}", "7".repeat(4999));
    let cases = [
        thousands.as_str(),
        thousands_plus_one.as_str(),
        r#"{"n":1.7976931348623157e308}"#,
        r#"{"n":5e-324}"#,
        r#"{"n":-0}"#,
    ];
    let mut intents = std::collections::HashSet::new();
    for body in cases {
        let answer = client.post("/tools/raw", "s", body).await;
        assert_eq!(answer.status, StatusCode::OK, "{body}");
        intents.insert(answer.intent().to_owned());
    }
    assert_eq!(intents.len(), cases.len(), "no two of these are one intent");
    // A typed parser tells -0, 0 and 0.0 apart: three intents, unless numbers merge.
    for zero in [r#"{"n":0}"#, r#"{"n":0.0}"#] {
        assert!(
            !client.post("/tools/raw", "s", zero).await.replayed(),
            "{zero}"
        );
    }
    let (merging, merged) = start(IdempotencyLayer::new().rfc8785_numbers()).await;
    for zero in [r#"{"n":-0}"#, r#"{"n":0}"#, r#"{"n":0.0}"#, r#"{"n":-0e3}"#] {
        merging.post("/tools/raw", "s", zero).await;
    }
    assert_eq!(merged.get("raw"), 1, "RFC 8785: every zero is 0");
    // With an exponent, RFC 8785 applies: a literal that rounds to the smallest subnormal is
    // that number, as for any upstream that reads it as a double.
    let rounded = client
        .post("/tools/raw", "s", r#"{"n":2.4703282292062328e-324}"#)
        .await;
    assert!(rounded.replayed());
    assert_eq!(counts.get("raw"), cases.len() + 2);
}

#[tokio::test]
async fn bodies_far_over_the_limit_are_refused_whatever_their_framing() {
    let (client, counts) = start(IdempotencyLayer::new().body_limit(1024)).await;
    let big = vec![b'x'; 5 * 1024 * 1024];
    // With an honest content-length: refused before reading.
    let declared = client
        .post_with("/tools/raw", &[("x-session-id", "s")], big.clone())
        .await;
    assert_eq!(declared.status, StatusCode::PAYLOAD_TOO_LARGE);
    // Chunked, no content-length: refused once the limit is passed.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
    let chunked = client
        .post_with(
            "/tools/raw",
            &[("x-session-id", "s")],
            reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)),
        )
        .await;
    assert_eq!(chunked.status, StatusCode::PAYLOAD_TOO_LARGE);
    // A content-length that promises more than the client sends before it hangs up: the body
    // cannot be read, so nothing runs.
    let short = raw_http_then(
        &client.base,
        b"POST /tools/raw HTTP/1.1\r\nhost: x\r\nx-session-id: s\r\ncontent-length: 100\r\n\r\n{\"a\":1}",
        true,
    )
    .await;
    assert!(!short.starts_with("HTTP/1.1 2"), "{short}");
    // One that claims more than the limit: refused at once, unread.
    let claims_more = raw_http(
        &client.base,
        b"POST /tools/raw HTTP/1.1\r\nhost: x\r\nx-session-id: s\r\ncontent-length: 999999999\r\nconnection: close\r\n\r\n{}",
    )
    .await;
    assert!(claims_more.starts_with("HTTP/1.1 413"), "{claims_more}");
    assert_eq!(counts.get("raw"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_body_that_breaks_off_halfway_is_not_executed() {
    let (client, counts) = start_in_memory(IdempotencyLayer::new());
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![
        Ok(br#"{"to":"a@b.c","#.to_vec()),
        Err(std::io::Error::other("the client went away")),
    ];
    let sent = client
        .try_send(
            client
                .http
                .post(format!("{}/tools/echo", client.base))
                .header("x-session-id", "s")
                .header("content-type", "application/json")
                .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                    chunks,
                ))),
        )
        .await;
    assert!(sent.is_err(), "the client's own stream failed");
    // Every task the request started runs before the paused clock moves a second on.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(counts.get("echo"), 0, "nothing ran");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_streams_slowly_is_still_one_intent() {
    let (client, counts) = start_in_memory(IdempotencyLayer::new());
    let slow = || {
        let chunks = [r#"{"to":"#, r#""a@b.c","#, r#""n":1}"#].map(|c| c.as_bytes().to_vec());
        futures_util::StreamExt::then(futures_util::stream::iter(chunks), |chunk| async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok::<_, std::io::Error>(chunk)
        })
    };
    for _ in 0..2 {
        let answer = client
            .post_with(
                "/tools/echo",
                &[("x-session-id", "s"), ("content-type", "application/json")],
                reqwest::Body::wrap_stream(slow()),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED);
    }
    assert_eq!(counts.get("echo"), 1);
}

#[tokio::test]
async fn header_values_that_are_not_utf8_are_handled_as_bytes() {
    let (client, counts) = start(IdempotencyLayer::new().idempotency_key_header()).await;
    let request = |session: &[u8]| {
        let mut bytes = b"POST /tools/raw HTTP/1.1\r\nhost: x\r\nx-session-id: ".to_vec();
        bytes.extend_from_slice(session);
        bytes.extend_from_slice(b"\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
        bytes
    };
    let first = raw_http(&client.base, &request(b"caf\xe9-\xff")).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let again = raw_http(&client.base, &request(b"caf\xe9-\xff")).await;
    assert!(again.contains("idempotent-replayed: true"), "{again}");
    let keyed = raw_http(
        &client.base,
        b"POST /tools/raw HTTP/1.1\r\nhost: x\r\nx-session-id: s\r\nidempotency-key: k\xff\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
    )
    .await;
    assert!(keyed.starts_with("HTTP/1.1 400"), "{keyed}");
    assert_eq!(counts.get("raw"), 1);
}

#[tokio::test]
async fn an_explicit_key_of_10_kb_is_refused_without_running() {
    let (client, counts) = start(IdempotencyLayer::new().idempotency_key_header()).await;
    let key = "k".repeat(10 * 1024);
    let answer = client
        .post_with(
            "/tools/raw",
            &[("x-session-id", "s"), ("idempotency-key", &key)],
            "{}",
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.json()["outcome"], "not_executed");
    assert_eq!(counts.get("raw"), 0);
}

/// A victim scope keeps 20 records while a hostile scope sends `flood(n)` to `path`, `count`
/// times, into a memory store of `max_bytes`; every victim record must still be replayed.
async fn victim_survives_a_flood(
    max_bytes: u64,
    path: &str,
    count: usize,
    flood: impl Fn(usize) -> String,
) -> (tower_idempotency::store::MemoryStore, Counts) {
    let store = tower_idempotency::store::MemoryStore::builder()
        .max_bytes(max_bytes)
        .build();
    let layer = IdempotencyLayer::with_store(store.clone());
    let (client, counts) = start(layer).await;
    let victim = |n: usize| format!(r#"{{"n":{n}}}"#);
    for n in 0..20 {
        client.post("/tools/echo", "victim", &victim(n)).await;
    }
    for n in 0..count {
        client.post(path, "flood", &flood(n)).await;
    }
    for n in 0..20 {
        let again = client.post("/tools/echo", "victim", &victim(n)).await;
        assert!(again.replayed(), "the victim's record {n} was kept");
    }
    (store, counts)
}

#[tokio::test]
async fn one_scope_flooding_the_memory_store_cannot_evict_another_scopes_records() {
    // A hostile scope keeps making new intents, several times the whole budget.
    let filler = "f".repeat(1000);
    let flood = |n| format!(r#"{{"n":{n},"filler":"{filler}"}}"#);
    let (store, counts) = victim_survives_a_flood(512 * 1024, "/tools/echo", 1500, flood).await;
    assert!(store.weighted_size() <= 512 * 1024);
    assert!(store.evictions() > 0, "the flood evicted its own records");
    assert_eq!(counts.get("echo"), 1520);
}

#[tokio::test]
async fn one_scope_whose_calls_all_fail_cannot_evict_another_scopes_records() {
    // Every failed call leaves a tombstone: they count against the failing scope's share.
    let flood = |n| format!(r#"{{"n":{n}}}"#);
    let (_, counts) = victim_survives_a_flood(256 * 1024, "/tools/status/503", 1200, flood).await;
    assert_eq!(counts.get("status"), 1200);
}

/// A flood of new callers into a memory store of 1 MiB: a victim's kept call, then `callers`
/// new sessions each calling `path` once with `body`. Returns the answers the flood got; the
/// victim's repeat must be replayed, its action run once.
async fn victim_outlives_new_callers(
    callers: usize,
    path: &str,
    body: &str,
) -> (Vec<support::Answer>, Counts) {
    let store = tower_idempotency::store::MemoryStore::builder()
        .max_bytes(1 << 20)
        .build();
    let (client, counts) = start(IdempotencyLayer::with_store(store.clone())).await;
    let payment = r#"{"id":7}"#;
    let first = client.post("/tools/intent", "victim", payment).await;
    assert_eq!(first.status, StatusCode::OK);
    let mut answers = Vec::with_capacity(callers);
    for n in 0..callers {
        answers.push(client.post(path, &format!("caller-{n}"), body).await);
    }
    let again = client.post("/tools/intent", "victim", payment).await;
    assert!(again.replayed(), "the victim's record was kept: {again:?}");
    assert_eq!(counts.get("intent:7"), 1, "the victim's action ran once");
    assert_eq!(store.evictions(), 0, "no kept record was evicted");
    (answers, counts)
}

#[tokio::test]
async fn new_callers_past_the_memory_budget_are_refused_and_never_evict_a_kept_record() {
    // 2 000 new sessions of about 2 KiB each: four times the budget.
    let body = r#"{"bytes":2000}"#;
    let (answers, counts) = victim_outlives_new_callers(2000, "/tools/big", body).await;
    let refused: Vec<_> = answers
        .iter()
        .filter(|answer| answer.status != StatusCode::OK)
        .collect();
    assert!(
        refused.len() > 1000,
        "the budget holds about 450 of them: {} refused",
        refused.len()
    );
    for answer in &refused {
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
        let told = answer.json();
        assert_eq!(told["outcome"], "not_executed", "{told}");
        assert_eq!(told["retryable"], true, "{told}");
        assert!(answer.header("retry-after").is_some(), "{answer:?}");
        let detail = told["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with(
                "This action was not executed: the idempotency store is full, so its outcome \
                 could not be kept."
            ),
            "{told}"
        );
    }
    assert_eq!(
        counts.get("big"),
        answers.len() - refused.len(),
        "a refused call ran nothing"
    );
}

#[tokio::test]
async fn failure_records_of_new_callers_never_push_out_a_kept_record() {
    // Each 401 leaves a failure record: 3 000 of them weigh more than the whole budget.
    let (answers, counts) = victim_outlives_new_callers(3000, "/tools/status/401", "{}").await;
    assert!(
        answers
            .iter()
            .all(|answer| answer.status == StatusCode::UNAUTHORIZED),
        "failure records make room for each other: none is refused"
    );
    assert_eq!(counts.get("status"), 3000);
}

#[tokio::test]
async fn a_scope_header_sent_more_than_once_is_refused_and_nothing_runs() {
    // A gateway in front that appends its own value would let the client's first one win:
    // two values name no one caller.
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let headers = [
        ("x-session-id", "mine"),
        ("x-session-id", "theirs"),
        ("content-type", "application/json"),
    ];
    let answer = client.post_with("/tools/echo", &headers, "{}").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let told = answer.json();
    assert_eq!(told["outcome"], "not_executed", "{told}");
    assert_eq!(told["retryable"], false, "{told}");
    let detail = told["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("The action was not executed"), "{told}");
    assert!(detail.contains("x-session-id"), "{told}");
    assert_eq!(counts.get("echo"), 0);
}

#[tokio::test]
async fn two_callers_sending_one_session_value_with_different_credentials_never_share_a_record() {
    // A session value is a name the client chose: it narrows a caller, never names one that
    // sends a credential.
    let (client, counts) = start(IdempotencyLayer::new()).await;
    let statement = r#"{"month":"05"}"#;
    let call = |credential: Option<&'static str>| {
        let client = &client;
        async move {
            let mut headers = vec![
                ("x-session-id", "default"),
                ("content-type", "application/json"),
            ];
            if let Some(credential) = credential {
                headers.push(("authorization", credential));
            }
            client.post_with("/tools/echo", &headers, statement).await
        }
    };
    let alice = call(Some("Bearer A")).await;
    let bob = call(Some("Bearer B")).await;
    assert!(!bob.replayed(), "{bob:?}");
    assert_ne!(alice.body, bob.body);
    let anonymous = call(None).await;
    assert!(!anonymous.replayed(), "{anonymous:?}");
    assert_eq!(counts.get("echo"), 3);
    // Each caller's own retry is still one intent.
    assert!(call(Some("Bearer A")).await.replayed());
    assert!(call(Some("Bearer B")).await.replayed());
    assert!(call(None).await.replayed());
    assert_eq!(counts.get("echo"), 3);
}

#[tokio::test]
async fn the_credential_headers_are_a_setting() {
    let layer = IdempotencyLayer::new().credential_headers(["x-api-key"]);
    let (client, counts) = start(layer).await;
    let call = |key: &'static str| {
        let client = &client;
        async move {
            let headers = [
                ("x-session-id", "default"),
                ("x-api-key", key),
                ("content-type", "application/json"),
            ];
            client.post_with("/tools/echo", &headers, "{}").await
        }
    };
    call("key-a").await;
    assert!(!call("key-b").await.replayed());
    assert!(call("key-a").await.replayed());
    assert_eq!(counts.get("echo"), 2);
}

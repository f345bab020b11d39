//! Round trips and damaged values.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::store::StoredResponse;

pub(super) fn identity() -> (ScopeHash, Fingerprint) {
    (
        ScopeHash::of(b"s"),
        Fingerprint::raw(Some(b"text/plain"), b"b"),
    )
}

/// A record of a full response, kept at times 1, 2 and 3.
pub(super) fn full_record(status: StatusCode, headers: HeaderMap, body: Bytes) -> Record {
    let (scope, fingerprint) = identity();
    Record {
        scope,
        fingerprint,
        started_at_ms: 1,
        completed_at_ms: 2,
        expires_at_ms: 3,
        response: KeptResponse::Full(StoredResponse {
            status,
            headers,
            body,
        }),
        protocol: Protocol::Http,
        operation: None,
        share: None,
        note: None,
        history: Vec::new(),
    }
}

#[test]
fn records_round_trip() {
    let (scope, fingerprint) = identity();
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.append("set-cookie", HeaderValue::from_static("a=1"));
    headers.append("set-cookie", HeaderValue::from_static("b=2"));
    let body = Bytes::from_static(b"{\"id\":1}");
    let record = full_record(StatusCode::CREATED, headers.clone(), body);
    let encoded = encode_record(&record);
    assert_eq!(encoded.len(), encoded_record_len(&record));
    assert_eq!(
        encoded.capacity(),
        encoded.len(),
        "written into one allocation of its size"
    );
    let StoredValue::Completed(back) = decode(Bytes::from(encoded)).unwrap() else {
        panic!("a record decodes as a record")
    };
    assert_eq!(back.scope, scope);
    assert_eq!(back.fingerprint, fingerprint);
    assert_eq!(
        (back.started_at_ms, back.completed_at_ms, back.expires_at_ms),
        (1, 2, 3)
    );
    let KeptResponse::Full(response) = back.response else {
        panic!("full")
    };
    assert_eq!(response.status, StatusCode::CREATED);
    assert_eq!(response.headers, headers);
    assert_eq!(&response.body[..], b"{\"id\":1}");
}

#[test]
fn running_entries_and_tombstones_round_trip() {
    let (scope, fingerprint) = identity();
    let token = OwnerToken::generate();
    let info = RunningInfo {
        started_at_ms: 42,
        scope,
        fingerprint,
    };
    let bytes = encode_running(&token, &info);
    assert_eq!(
        &bytes[2..18],
        token.as_bytes(),
        "scripts read the token here"
    );
    let StoredValue::Running(owner, back) = decode(Bytes::from(bytes)).unwrap() else {
        panic!("running")
    };
    assert_eq!(owner, token);
    assert_eq!(back.started_at_ms, 42);
    let tombstone = Tombstone {
        scope,
        fingerprint,
        failed_at_ms: 9,
        status: None,
        cause: ReleaseCause::Panic,
        retry_after_s: None,
        share: None,
        failures: 1,
        history: Vec::new(),
    };
    let StoredValue::Failed(back) = decode(Bytes::from(encode_tombstone(&tombstone))).unwrap()
    else {
        panic!("failed")
    };
    assert_eq!(back.status, None);
    assert_eq!(back.cause, ReleaseCause::Panic);
    assert_eq!(back.retry_after_s, None);
    let busy = Tombstone {
        status: Some(StatusCode::TOO_MANY_REQUESTS),
        cause: ReleaseCause::Status,
        retry_after_s: Some(7),
        ..tombstone.clone()
    };
    let StoredValue::Failed(back) = decode(Bytes::from(encode_tombstone(&busy))).unwrap() else {
        panic!("failed")
    };
    assert_eq!(back.retry_after_s, Some(7));
    assert_eq!(back.share, None);
    let narrowed = Tombstone {
        share: Some(ScopeHash::of(b"credential")),
        ..busy.clone()
    };
    let StoredValue::Failed(back) = decode(Bytes::from(encode_tombstone(&narrowed))).unwrap()
    else {
        panic!("failed")
    };
    assert_eq!(
        (back.retry_after_s, back.share),
        (Some(7), narrowed.share),
        "a wait and a share read back"
    );
    // A wait as versions before the extensions wrote it still reads.
    let mut earlier = encode_tombstone(&tombstone);
    earlier.extend_from_slice(&7u32.to_be_bytes());
    let StoredValue::Failed(back) = decode(Bytes::from(earlier)).unwrap() else {
        panic!("failed")
    };
    assert_eq!(back.retry_after_s, Some(7));
    // The failures in a row read back; a tombstone written before them reads as its cause
    // implies (one failure, or none for a cause the retry budget does not count).
    let third = Tombstone {
        failures: 3,
        ..busy.clone()
    };
    let StoredValue::Failed(back) = decode(Bytes::from(encode_tombstone(&third))).unwrap() else {
        panic!("failed")
    };
    assert_eq!(back.failures, 3);
    let refused = Tombstone {
        cause: ReleaseCause::Credentials,
        failures: 0,
        ..busy.clone()
    };
    let bytes = encode_tombstone(&refused);
    assert_eq!(
        bytes,
        encode_tombstone(&Tombstone {
            failures: 0,
            ..refused.clone()
        })
    );
    let StoredValue::Failed(back) = decode(Bytes::from(bytes)).unwrap() else {
        panic!("failed")
    };
    assert_eq!(back.failures, 0);
    assert_eq!(
        encode_tombstone(&busy).len(),
        encode_tombstone(&third).len() - 7
    );
    // Every cause reads back as itself.
    for cause in [
        ReleaseCause::Status,
        ReleaseCause::Credentials,
        ReleaseCause::NoStore,
        ReleaseCause::Predicate,
        ReleaseCause::InnerError,
        ReleaseCause::Panic,
        ReleaseCause::ResponseBody,
        ReleaseCause::Cancelled,
        ReleaseCause::InputRequired,
        ReleaseCause::RolledBack,
    ] {
        let released = Tombstone {
            cause,
            failures: u32::from(cause.counts_as_failure()),
            ..busy.clone()
        };
        let StoredValue::Failed(back) = decode(Bytes::from(encode_tombstone(&released))).unwrap()
        else {
            panic!("failed")
        };
        assert_eq!(back.cause, cause);
        assert_eq!(back.failures, released.failures);
    }
}

#[test]
fn responses_not_kept_say_why() {
    let (scope, fingerprint) = identity();
    for why in [
        Omission::TooLarge,
        Omission::NoStore,
        Omission::Unclassified,
        Omission::Interrupted,
        Omission::Resolved,
    ] {
        let record = Record {
            scope,
            fingerprint,
            started_at_ms: 1,
            completed_at_ms: 2,
            expires_at_ms: 3,
            response: KeptResponse::Omitted {
                status: StatusCode::OK,
                why,
            },
            protocol: Protocol::Http,
            operation: Some(std::sync::Arc::from("POST /tools/send_email")),
            share: Some(ScopeHash::of(b"principal")),
            note: Some(std::sync::Arc::from("sent, checked by hand")),
            history: Vec::new(),
        };
        let encoded = encode_record(&record);
        assert_eq!(encoded.capacity(), encoded.len());
        let StoredValue::Completed(back) = decode(Bytes::from(encoded)).unwrap() else {
            panic!("a record decodes as a record")
        };
        assert!(matches!(back.response, KeptResponse::Omitted { why: w, .. } if w == why));
        assert_eq!(back.operation, record.operation);
        assert_eq!(back.share, record.share);
        assert_eq!(back.note, record.note);
    }
}

#[test]
fn damaged_values_are_errors_not_panics() {
    let (scope, fingerprint) = identity();
    let info = RunningInfo {
        started_at_ms: 1,
        scope,
        fingerprint,
    };
    let good = encode_running(&OwnerToken::generate(), &info);
    for cut in 0..good.len() {
        assert!(decode(Bytes::copy_from_slice(&good[..cut])).is_err());
    }
    let mut future = good.clone();
    future[0] = 2;
    assert_eq!(
        decode(Bytes::from(future)).err(),
        Some(DecodeError("unknown version"))
    );
}

#[test]
fn an_mcp_record_carries_its_dialect_and_an_http_one_is_written_as_before() {
    let (scope, fingerprint) = identity();
    let mut record = Record::new(scope, fingerprint, 1, 2, 3, KeptResponse::Abandoned);
    let http = encode_record(&record);
    assert_eq!(http.len(), 2 + 32 + 33 + 24 + 1, "no extension for HTTP");
    record.protocol = Protocol::Mcp;
    let mcp = encode_record(&record);
    assert_eq!((http.capacity(), mcp.capacity()), (http.len(), mcp.len()));
    assert_eq!(&mcp[..http.len()], &http[..]);
    let StoredValue::Completed(back) = decode(Bytes::from(mcp)).unwrap() else {
        panic!("a record decodes as a record")
    };
    assert_eq!(back.protocol, Protocol::Mcp);
}

#[test]
fn unknown_extensions_are_skipped() {
    let (scope, fingerprint) = identity();
    let record = Record::new(scope, fingerprint, 1, 2, 3, KeptResponse::Abandoned);
    let mut bytes = encode_record(&record);
    bytes.extend_from_slice(&[b'Z', 0, 3, 1, 2, 3]);
    let StoredValue::Completed(back) = decode(Bytes::from(bytes.clone())).unwrap() else {
        panic!("a record decodes as a record")
    };
    assert_eq!(back.protocol, Protocol::Http);
    bytes.truncate(bytes.len() - 1);
    assert!(
        decode(Bytes::from(bytes)).is_err(),
        "a cut extension is damage"
    );
}

#[test]
fn a_record_of_more_headers_than_a_map_holds_is_an_error_not_a_panic() {
    let record = full_record(StatusCode::OK, HeaderMap::new(), Bytes::new());
    let empty = encode_record(&record);
    // The version, the kind, the identity and three times, then the response's tag, its
    // status and its count of headers.
    let count_at = 1 + 1 + 32 + 33 + 3 * 8 + 1 + 2;
    assert_eq!(empty[count_at - 3], b'F');
    let many = 40_000u32;
    let mut crafted = empty[..count_at].to_vec();
    crafted.extend_from_slice(&many.to_be_bytes());
    for n in 0..many {
        let name = format!("x-{n}");
        crafted.extend_from_slice(&(name.len() as u16).to_be_bytes());
        crafted.extend_from_slice(name.as_bytes());
        crafted.extend_from_slice(&1u32.to_be_bytes());
        crafted.push(b'v');
    }
    crafted.extend_from_slice(&empty[count_at + 4..]);
    assert!(decode(Bytes::from(crafted)).is_err());
}

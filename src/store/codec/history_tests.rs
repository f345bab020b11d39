//! The history extension: round trips, values written before it, kinds added later, damage.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::tests::{full_record, identity};
use super::*;
use crate::store::{Event, Instance, Transition};

/// A story with a transition of every kind, by another process.
fn every_kind_of_transition() -> Vec<Transition> {
    let other = Instance::from_bytes([1, 2, 3, 4]);
    [
        Event::Claimed,
        Event::Released {
            status: Some(StatusCode::SERVICE_UNAVAILABLE),
            cause: ReleaseCause::Status,
            duration_ms: 12,
        },
        Event::Claimed,
        Event::Released {
            status: None,
            cause: ReleaseCause::InnerError,
            duration_ms: 0,
        },
        Event::Claimed,
        Event::Abandoned {
            duration_ms: 30_000,
        },
        Event::Resolved { note: None },
        Event::Resolved {
            note: Some(std::sync::Arc::from("checked: the mail went out")),
        },
        Event::Claimed,
        Event::Executed {
            status: StatusCode::CREATED,
            duration_ms: u64::MAX,
        },
    ]
    .into_iter()
    .zip(100..)
    .map(|(event, at)| Transition::by(other, at, event))
    .collect()
}

#[test]
fn a_records_and_a_tombstones_history_round_trip_in_order() {
    let mut record = full_record(StatusCode::CREATED, HeaderMap::new(), Bytes::from("{}"));
    record.history = every_kind_of_transition();
    let encoded = encode_record(&record);
    assert_eq!(encoded.len(), encoded_record_len(&record));
    assert_eq!(encoded.capacity(), encoded.len());
    let StoredValue::Completed(back) = decode(Bytes::from(encoded)).unwrap() else {
        panic!("a record decodes as a record")
    };
    assert_eq!(back.history, record.history);

    let (scope, fingerprint) = identity();
    let mut tombstone = Tombstone::new(
        scope,
        fingerprint,
        9,
        Some(StatusCode::SERVICE_UNAVAILABLE),
        ReleaseCause::Status,
        Some(2),
    );
    tombstone.history = every_kind_of_transition();
    let StoredValue::Failed(back) = decode(Bytes::from(encode_tombstone(&tombstone))).unwrap()
    else {
        panic!("failed")
    };
    assert_eq!(back.history, tombstone.history);
    assert_eq!(
        back.retry_after_s,
        Some(2),
        "the other extensions still read"
    );
}

#[test]
fn a_value_without_a_history_is_written_as_before_and_reads_with_an_empty_one() {
    let record = full_record(StatusCode::OK, HeaderMap::new(), Bytes::from("ok"));
    let bare = encode_record(&record);
    let mut with = record.clone();
    with.history = vec![Transition::new(1, Event::Claimed)];
    let longer = encode_record(&with);
    assert_eq!(
        &longer[..bare.len()],
        &bare[..],
        "the history is an extension at the end"
    );
    let StoredValue::Completed(back) = decode(Bytes::from(bare)).unwrap() else {
        panic!("a record decodes as a record")
    };
    assert!(back.history.is_empty());
}

#[test]
fn a_transition_of_a_kind_added_later_is_skipped_and_the_rest_read() {
    let mut record = full_record(StatusCode::OK, HeaderMap::new(), Bytes::from("ok"));
    record.history = vec![Transition::new(1, Event::Claimed)];
    let mut encoded = encode_record(&record);
    // A later writer's transition, after the one this reader knows.
    let mut later = Vec::new();
    later.extend_from_slice(&2u64.to_be_bytes());
    later.extend_from_slice(&[9, 9, 9, 9, b'?', 3, 1, 2, 3]);
    let length_at = encoded.len() - (8 + 4 + 1 + 1) - 2;
    let length = u16::from_be_bytes([encoded[length_at], encoded[length_at + 1]]);
    encoded[length_at..length_at + 2].copy_from_slice(&(length + later.len() as u16).to_be_bytes());
    encoded.extend_from_slice(&later);
    let StoredValue::Completed(back) = decode(Bytes::from(encoded)).unwrap() else {
        panic!("a record decodes as a record")
    };
    assert_eq!(back.history, record.history);
}

#[test]
fn a_damaged_history_is_an_error_not_a_panic() {
    let mut record = full_record(StatusCode::OK, HeaderMap::new(), Bytes::from("ok"));
    record.history = every_kind_of_transition();
    let encoded = encode_record(&record);
    let history_len = encoded.len()
        - encode_record(&full_record(
            StatusCode::OK,
            HeaderMap::new(),
            Bytes::from("ok"),
        ))
        .len();
    let start = encoded.len() - history_len;
    for cut in 1..history_len {
        // The extension's own length says more than is left: truncated.
        assert!(decode(Bytes::from(encoded[..start + cut].to_vec())).is_err());
        // The extension cut short at its own length: every prefix of its entries.
        let mut short = encoded[..start + cut].to_vec();
        let value_len = (cut.saturating_sub(3)) as u16;
        if cut >= 3 {
            short[start + 1..start + 3].copy_from_slice(&value_len.to_be_bytes());
            let _ = decode(Bytes::from(short));
        }
    }
}

#[test]
fn a_resolutions_long_note_is_cut_at_a_character_boundary_in_the_history() {
    let mut record = full_record(StatusCode::OK, HeaderMap::new(), Bytes::from("ok"));
    let note: String = "é".repeat(300);
    record.history = vec![Transition::new(
        1,
        Event::Resolved {
            note: Some(std::sync::Arc::from(note.as_str())),
        },
    )];
    let encoded = encode_record(&record);
    assert_eq!(encoded.len(), encoded_record_len(&record));
    let StoredValue::Completed(back) = decode(Bytes::from(encoded)).unwrap() else {
        panic!("a record decodes as a record")
    };
    let Event::Resolved { note: Some(kept) } = &back.history[0].event else {
        panic!("a resolution")
    };
    assert_eq!(kept.len(), 240);
    assert!(note.starts_with(&**kept));
}

#[test]
fn a_history_longer_than_the_limit_is_written_as_its_last_sixteen() {
    let mut record = full_record(StatusCode::OK, HeaderMap::new(), Bytes::from("ok"));
    let note = std::sync::Arc::<str>::from("n".repeat(300));
    record.history = (0..1000)
        .map(|at| {
            let note = Some(std::sync::Arc::clone(&note));
            Transition::new(at, Event::Resolved { note })
        })
        .collect();
    let encoded = encode_record(&record);
    assert_eq!(encoded.len(), encoded_record_len(&record));
    let StoredValue::Completed(back) = decode(Bytes::from(encoded)).unwrap() else {
        panic!("a record decodes as a record")
    };
    let times: Vec<u64> = back.history.iter().map(|t| t.at_ms).collect();
    assert_eq!(times, (984..1000).collect::<Vec<u64>>());
}

#[test]
fn a_stored_history_longer_than_the_limit_reads_as_its_last_sixteen() {
    // A store may hold bytes no encoder of this crate wrote: read back, they keep the limit,
    // so that a value read and written again is the value read.
    let story: Vec<Transition> = (0..20)
        .map(|at| Transition::new(at, Event::Claimed))
        .collect();
    let mut bytes = Vec::new();
    history::put(&mut bytes, &story);
    let back = history::read(&bytes).unwrap();
    let times: Vec<u64> = back.iter().map(|t| t.at_ms).collect();
    assert_eq!(times, (4..20).collect::<Vec<u64>>());
}

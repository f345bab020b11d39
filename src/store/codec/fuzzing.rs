//! What the fuzz targets reach of the record codec. Built only with `--cfg fuzzing`.

use bytes::Bytes;

use super::{decode, encode_record, encode_running, encode_tombstone, StoredValue};

/// Decodes `bytes` as a store's value: whatever decodes encodes to bytes that decode to the
/// same value, and encode to the same bytes again.
///
/// # Panics
///
/// Where a decoded value does not survive its encoding.
pub fn check_record_decode(bytes: &[u8]) {
    let Ok(value) = decode(Bytes::copy_from_slice(bytes)) else {
        return;
    };
    let encoded = encode(&value);
    let again = match decode(Bytes::from(encoded.clone())) {
        Ok(again) => again,
        Err(error) => panic!("{value:?} encodes to bytes that do not decode: {error}"),
    };
    assert_eq!(format!("{value:?}"), format!("{again:?}"), "the same value");
    assert_eq!(encode(&again), encoded, "the same bytes");
}

fn encode(value: &StoredValue) -> Vec<u8> {
    match value {
        StoredValue::Running(token, info) => encode_running(token, info),
        StoredValue::Completed(record) => encode_record(record),
        StoredValue::Failed(tombstone) => encode_tombstone(tombstone),
    }
}

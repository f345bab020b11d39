//! What a store keeps, as versioned bytes: for a store written elsewhere that persists bytes
//! (a database column, a key-value store). A later version of this crate reads the bytes an
//! earlier one wrote. Fields added to records later travel as extensions that older readers
//! skip; tombstones and running entries have no such room yet, and a field added to them will
//! come with a new version byte.

use bytes::Bytes;

use super::codec::{self, DecodeError, StoredValue};
use super::{OwnerToken, Record, RunningInfo, Tombstone};

impl Record {
    /// This record as bytes that [`Record::decode`] reads back, field for field.
    ///
    /// ```
    /// use tower_idempotency::key::{Fingerprint, ScopeHash};
    /// use tower_idempotency::store::{KeptResponse, Record};
    ///
    /// # let fingerprint = Fingerprint::from_bytes(&[b'J'; 33]).unwrap();
    /// let record = Record::new(ScopeHash::of(b"s"), fingerprint, 1, 2, 3, KeptResponse::Abandoned);
    /// let back = Record::decode(record.encode()).unwrap();
    /// assert_eq!(back.completed_at_ms, 2);
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        codec::encode_record(self)
    }

    /// The record that [`Record::encode`] wrote. A kept body is sliced out of `bytes`, not
    /// copied.
    pub fn decode(bytes: impl Into<Bytes>) -> Result<Self, DecodeError> {
        match codec::decode(bytes.into())? {
            StoredValue::Completed(record) => Ok(record),
            _ => Err(DecodeError("not a record")),
        }
    }
}

impl Tombstone {
    /// This tombstone as bytes that [`Tombstone::decode`] reads back.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode_tombstone(self)
    }

    /// The tombstone that [`Tombstone::encode`] wrote.
    pub fn decode(bytes: impl Into<Bytes>) -> Result<Self, DecodeError> {
        match codec::decode(bytes.into())? {
            StoredValue::Failed(tombstone) => Ok(tombstone),
            _ => Err(DecodeError("not a tombstone")),
        }
    }
}

impl RunningInfo {
    /// This running entry, held under `token`, as bytes that [`RunningInfo::decode`] reads
    /// back. The token sits at bytes 2 to 18, where a store's own scripts can compare it.
    pub fn encode(&self, token: &OwnerToken) -> Vec<u8> {
        codec::encode_running(token, self)
    }

    /// The running entry that [`RunningInfo::encode`] wrote, and its owner's token.
    pub fn decode(bytes: impl Into<Bytes>) -> Result<(OwnerToken, Self), DecodeError> {
        match codec::decode(bytes.into())? {
            StoredValue::Running(token, info) => Ok((token, info)),
            _ => Err(DecodeError("not a running entry")),
        }
    }
}

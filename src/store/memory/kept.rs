//! A completed record as the memory store keeps it: its versioned encoding, in one allocation,
//! until it is first read.
//!
//! At the byte budget every record kept evicts an older one. A record held as it was built
//! (an `Arc` around a header map and a shared body) is five allocations spread over the heap,
//! each touched cold when it is let go, and the allocator then hands their cold chunks to the
//! next requests. Its encoding is one allocation of its exact size, let go in one touch; what
//! the record was built from is freed at once, while it is still in cache. The first read
//! decodes it (the body sliced, not copied) and keeps what it decoded: a record read once is
//! read again soon (repeats come in bursts), and a flood's records are never read at all.

use std::sync::Arc;

use bytes::Bytes;

use crate::store::Record;

/// One completed record: encoded, or decoded once read.
pub(super) enum CachedRecord {
    Encoded(Bytes),
    Decoded(Arc<Record>),
}

impl CachedRecord {
    pub(super) fn new(record: &Record) -> Self {
        Self::Encoded(Bytes::from(record.encode()))
    }

    /// The record, decoded without keeping it so: for an operator's listing, which must not
    /// change what a value weighs or holds.
    pub(super) fn peek(&self) -> Arc<Record> {
        match self {
            Self::Decoded(record) => Arc::clone(record),
            Self::Encoded(encoded) => Arc::new(
                Record::decode(encoded.clone())
                    .expect("the memory store reads back the encoding it wrote"),
            ),
        }
    }

    /// The record, decoded at its first read and kept so.
    ///
    /// # Panics
    ///
    /// If the bytes do not decode, which would be a fault of the encoding: a missing record
    /// would let a repeat run again, so the store call fails instead (and the layer answers as
    /// for any store failure).
    pub(super) fn record(&mut self) -> Arc<Record> {
        match self {
            Self::Decoded(record) => Arc::clone(record),
            Self::Encoded(encoded) => {
                let record = Record::decode(encoded.clone())
                    .expect("the memory store reads back the encoding it wrote");
                let record = Arc::new(record);
                *self = Self::Decoded(Arc::clone(&record));
                record
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue, StatusCode};

    use super::*;
    use crate::key::{Fingerprint, ScopeHash};
    use crate::store::{KeptResponse, Protocol, StoredResponse};

    #[test]
    fn a_kept_record_reads_back_field_for_field() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.append("set-cookie", HeaderValue::from_static("a=1"));
        let body = Bytes::from_static(br#"{"status":"sent"}"#);
        let response = StoredResponse::new(StatusCode::CREATED, headers.clone(), body.clone());
        let mut record = Record::new(
            ScopeHash::of(b"s"),
            Fingerprint::raw(None, b"{}"),
            1,
            2,
            3,
            KeptResponse::Full(response),
        );
        record.protocol = Protocol::Mcp;
        let mut kept = CachedRecord::new(&record);
        assert!(matches!(kept, CachedRecord::Encoded(_)));
        let back = kept.record();
        assert!(
            matches!(&kept, CachedRecord::Decoded(decoded) if Arc::ptr_eq(decoded, &back)),
            "the first read keeps what it decoded"
        );
        assert!(Arc::ptr_eq(&kept.record(), &back));
        assert_eq!(back.scope, record.scope);
        assert_eq!(back.fingerprint, record.fingerprint);
        let times = (back.started_at_ms, back.completed_at_ms, back.expires_at_ms);
        assert_eq!(times, (1, 2, 3));
        assert_eq!(back.protocol, Protocol::Mcp);
        let KeptResponse::Full(stored) = &back.response else {
            panic!("the response was kept whole")
        };
        assert_eq!(stored.status, StatusCode::CREATED);
        assert_eq!(stored.headers, headers);
        assert_eq!(stored.body, body);
    }
}

//! What an operator asks of the Redis store: a listing by `SCAN` over the store's own keys, a
//! removal and a resolution kept without an owner.

use std::sync::Arc;
use std::time::Duration;

use super::{decode, millis_arg, timed, Connection, RedisStore};
use crate::key::IntentKey;
use crate::store::codec;
use crate::store::{Record, Scanned, StoreError};

impl RedisStore {
    /// A page of `SCAN` over the keys under the prefix, read with one `MGET`. On one node
    /// only: a cluster's keys are spread over its masters.
    pub(super) async fn scan_page(&self, cursor: u64, count: usize) -> Result<Scanned, StoreError> {
        if matches!(self.connection, Connection::Cluster(_)) {
            return Err(StoreError::new(
                "listing what a Redis Cluster holds is not supported: list each master's keys \
                 with SCAN, or run the listing against a single-node store",
            ));
        }
        let mut connection = self.connection.clone();
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(format!("{}{{*}}", escape_glob(&self.prefix)))
            .arg("COUNT")
            .arg(count.max(1));
        let (next, names): (u64, Vec<String>) =
            timed(self.call_timeout, scan.query_async(&mut connection)).await?;
        // Observe mode's counts share the prefix (`…}:calls`): only intents' own keys count.
        let keys: Vec<(String, IntentKey)> = names
            .into_iter()
            .filter_map(|name| {
                let key = self.intent_of(&name)?;
                Some((name, key))
            })
            .collect();
        if keys.is_empty() {
            return Ok(Scanned::new(Vec::new(), next));
        }
        let mut mget = redis::cmd("MGET");
        for (name, _) in &keys {
            mget.arg(name);
        }
        let values: Vec<Option<Vec<u8>>> =
            timed(self.call_timeout, mget.query_async(&mut connection)).await?;
        let mut entries = Vec::with_capacity(keys.len());
        for ((_, key), value) in keys.into_iter().zip(values) {
            // Expired between the scan and the read: gone.
            if let Some(value) = value {
                entries.push((key, decode(value)?.into_entry()));
            }
        }
        Ok(Scanned::new(entries, next))
    }

    /// The intent a key of this store names, if it is one.
    fn intent_of(&self, name: &str) -> Option<IntentKey> {
        let hex = name
            .strip_prefix(&*self.prefix)?
            .strip_prefix('{')?
            .strip_suffix('}')?;
        hex.parse().ok()
    }

    pub(super) async fn remove_key(&self, key: &IntentKey) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let mut del = redis::cmd("DEL");
        del.arg(self.redis_key(key));
        let removed: u64 = timed(self.call_timeout, del.query_async(&mut connection)).await?;
        Ok(removed > 0)
    }

    pub(super) async fn put_record(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let mut set = redis::cmd("SET");
        set.arg(self.redis_key(key))
            .arg(codec::encode_record(&record))
            .arg("PX")
            .arg(millis_arg(retention));
        let () = timed(self.call_timeout, set.query_async(&mut connection)).await?;
        Ok(())
    }
}

/// `text` with the characters a `MATCH` pattern reads as a glob escaped.
fn escape_glob(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_prefix_with_glob_characters_is_matched_as_written() {
        assert_eq!(super::escape_glob("app*:[a]"), "app\\*:\\[a\\]");
    }
}

//! What an operator asks of the Redis store: a listing by `SCAN` over the store's own keys
//! (each master's in turn on a cluster), a removal and a resolution kept without an owner,
//! neither of which touches a running lease.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::{decode, millis_arg, scripts, timed, Connection, RedisStore};
use crate::key::IntentKey;
use crate::store::codec;
use crate::store::{Record, Scanned, StoreError};

impl RedisStore {
    /// A page of `SCAN` over the keys under the prefix, their values read together.
    /// On a cluster, each master's keys in turn, in the order of their addresses: the
    /// cursor's top 16 bits name the master, the rest is its own `SCAN` cursor.
    pub(super) async fn scan_page(&self, cursor: u64, count: usize) -> Result<Scanned, StoreError> {
        let mut scan = redis::cmd("SCAN");
        let pattern = format!("{}{{*}}", escape_glob(&self.prefix));
        let node_cursor = cursor & NODE_CURSOR;
        scan.arg(node_cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count.max(1));
        let (next, names): (u64, Vec<String>) = match &self.connection {
            Connection::Single(single) => {
                let mut single = single.clone();
                timed(self.call_timeout, scan.query_async(&mut single)).await?
            }
            Connection::Cluster(cluster) => {
                let mut cluster = cluster.clone();
                let masters = self.masters(&mut cluster).await?;
                let index = usize::try_from(cursor >> 48).unwrap_or(usize::MAX);
                let Some((host, port)) = masters.get(index) else {
                    return Ok(Scanned::new(Vec::new(), 0));
                };
                let node = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                };
                let routed = cluster.route_command(scan, RoutingInfo::SingleNode(node));
                let answer = timed(self.call_timeout, routed).await?;
                let (next, names): (u64, Vec<String>) =
                    redis::from_redis_value(answer).map_err(StoreError::new)?;
                let index = index as u64;
                let next = match next {
                    0 if index + 1 < masters.len() as u64 => (index + 1) << 48,
                    0 => 0,
                    next => (index << 48) | (next & NODE_CURSOR),
                };
                (next, names)
            }
        };
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
        let values = self.values(&keys).await?;
        let mut entries = Vec::with_capacity(keys.len());
        for ((_, key), value) in keys.into_iter().zip(values) {
            // Expired between the scan and the read: gone.
            if let Some(value) = value {
                entries.push((key, decode(value)?.into_entry()));
            }
        }
        Ok(Scanned::new(entries, next))
    }

    /// The values of `keys`, `None` where one expired since the scan: one pipeline on a node;
    /// on a cluster, one `GET` each, together (a pipeline there must stay in one slot).
    async fn values(
        &self,
        keys: &[(String, IntentKey)],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if let Connection::Cluster(_) = &self.connection {
            let gets = keys.iter().map(|(name, _)| {
                let mut connection = self.connection.clone();
                let mut get = redis::cmd("GET");
                get.arg(name);
                async move { timed(self.call_timeout, get.query_async(&mut connection)).await }
            });
            return futures_util::future::join_all(gets)
                .await
                .into_iter()
                .collect();
        }
        let mut pipeline = redis::pipe();
        for (name, _) in keys {
            pipeline.get(name);
        }
        let mut connection = self.connection.clone();
        timed(self.call_timeout, pipeline.query_async(&mut connection)).await
    }

    /// The cluster's masters that answer, by address.
    async fn masters(
        &self,
        cluster: &mut redis::cluster_async::ClusterConnection,
    ) -> Result<Vec<(String, u16)>, StoreError> {
        let nodes = cluster.route_command(
            redis::cmd("CLUSTER").arg("NODES").clone(),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        );
        let text: String = redis::from_redis_value(timed(self.call_timeout, nodes).await?)
            .map_err(StoreError::new)?;
        let mut masters: Vec<(String, u16)> = text.lines().filter_map(master_of).collect();
        masters.sort();
        Ok(masters)
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
        let removed: u64 = self.run(&scripts::REMOVE_SETTLED, key, &[]).await?;
        Ok(removed > 0)
    }

    pub(super) async fn put_record(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        let encoded = codec::encode_record(&record);
        let retention = millis_arg(retention);
        let args: [&[u8]; 2] = [&encoded, retention.as_bytes()];
        let written: u64 = self.run(&scripts::PUT_SETTLED, key, &args).await?;
        Ok(written > 0)
    }
}

/// The bits of a cluster's cursor that are one master's own `SCAN` cursor.
const NODE_CURSOR: u64 = (1 << 48) - 1;

/// The address of a master that answers, from a line of `CLUSTER NODES`
/// (`<id> <ip:port@cport[,hostname]> <flags> …`).
fn master_of(line: &str) -> Option<(String, u16)> {
    let mut fields = line.split_whitespace();
    let address = fields.nth(1)?;
    let flags = fields.next()?;
    let flags: Vec<&str> = flags.split(',').collect();
    if !flags.contains(&"master") || flags.iter().any(|flag| flag.starts_with("fail")) {
        return None;
    }
    let address = address.split(['@', ',']).next()?;
    let (host, port) = address.rsplit_once(':')?;
    Some((host.to_owned(), port.parse().ok()?))
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
    fn the_masters_that_answer_are_read_from_cluster_nodes() {
        let line = "07c3 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460";
        assert_eq!(
            super::master_of(line),
            Some(("127.0.0.1".to_owned(), 30001))
        );
        let replica = "67ed 127.0.0.1:30004@40004 slave 07c3 0 1 1 connected";
        assert_eq!(super::master_of(replica), None);
        let failed = "292f 127.0.0.1:30002@40002,node-2 master,fail - 0 1 2 connected";
        assert_eq!(super::master_of(failed), None);
    }

    #[test]
    fn a_prefix_with_glob_characters_is_matched_as_written() {
        assert_eq!(super::escape_glob("app*:[a]"), "app\\*:\\[a\\]");
    }
}

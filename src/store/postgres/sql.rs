//! The SQL that makes each Postgres operation one atomic statement, written for one table.
//!
//! A row holds an intent's [`codec`](super::super::codec) encoding, as the Redis store's keys do:
//! byte 1 the version, byte 2 the kind (`R` 82, `C` 67, `F` 70), bytes 3..18 the owner token of
//! a running entry. A row's `expires_at` is its lease, its retention or its tombstone's time;
//! every time is the database's (`clock_timestamp()`), never an instance's, and a row past it
//! counts as absent until the sweep deletes it.

/// The statements, for one table.
pub(super) struct Statements {
    pub(super) migrate: String,
    pub(super) claim: String,
    pub(super) complete: String,
    pub(super) release: String,
    pub(super) extend: String,
    pub(super) abandon: String,
    pub(super) get: String,
    pub(super) count_call: String,
    pub(super) complete_in_transaction: String,
    pub(super) scan: String,
    pub(super) remove: String,
    pub(super) put: String,
    pub(super) settled: String,
    pub(super) sweep: String,
    pub(super) sweep_calls: String,
}

/// The owner's token, of a running row.
const TOKEN: &str = "substring(e.value FROM 3 FOR 16)";
/// A milliseconds argument `$n` as an interval from now.
fn from_now(n: u8) -> String {
    format!("clock_timestamp() + (${n}::bigint * interval '1 millisecond')")
}

impl Statements {
    /// The statements over `table` (checked by the builder: a plain identifier).
    pub(super) fn for_table(table: &str) -> Self {
        let calls = format!("{table}_calls");
        Self {
            // Serialized by an advisory lock: instances starting at once would otherwise race
            // to create the same table.
            migrate: format!(
                "SELECT pg_advisory_xact_lock(7305117711);
                 CREATE TABLE IF NOT EXISTS {table} (
                   key bytea PRIMARY KEY, value bytea NOT NULL, expires_at timestamptz NOT NULL);
                 CREATE INDEX IF NOT EXISTS {table}_expires_at ON {table} (expires_at);
                 CREATE TABLE IF NOT EXISTS {calls} (
                   key bytea PRIMARY KEY, calls bigint NOT NULL, ends_at timestamptz NOT NULL);
                 CREATE INDEX IF NOT EXISTS {calls}_ends_at ON {calls} (ends_at);"
            ),
            // $1 key, $2 running entry, $3 lease ms. Takes the intent where nothing live holds
            // it, a tombstone does, or this claim's own token does (a repeated claim); else
            // answers what holds it. Either way the value read is the statement's snapshot's,
            // from before the claim: where it took the intent over a tombstone, that one. Nothing live and not taken: a row inserted after this
            // statement's snapshot, so the caller asks again.
            claim: format!(
                "WITH taken AS (
                   INSERT INTO {table} AS e (key, value, expires_at) VALUES ($1, $2, {lease})
                   ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
                   WHERE e.expires_at <= clock_timestamp()
                      OR (get_byte(e.value, 0) = 1 AND get_byte(e.value, 1) NOT IN (82, 67))
                      OR (get_byte(e.value, 1) = 82 AND {TOKEN} = substring(excluded.value FROM 3 FOR 16))
                   RETURNING 1)
                 SELECT EXISTS (SELECT 1 FROM taken),
                   (SELECT value FROM {table} WHERE key = $1 AND expires_at > clock_timestamp())",
                lease = from_now(3)
            ),
            // $1 key, $2 token, $3 record, $4 retention ms. Written unless another owner runs
            // the intent or another record is kept.
            complete: format!(
                "INSERT INTO {table} AS e (key, value, expires_at) VALUES ($1, $3, {retention})
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
                 WHERE e.expires_at <= clock_timestamp()
                    OR (get_byte(e.value, 1) = 82 AND {TOKEN} = $2)
                    OR get_byte(e.value, 1) NOT IN (82, 67)
                    OR e.value = excluded.value
                 RETURNING 1",
                retention = from_now(4)
            ),
            // $1 key, $2 token, $3 tombstone, $4 ttl ms. Replaces this owner's running entry
            // (or nothing live) with the tombstone.
            release: format!(
                "INSERT INTO {table} AS e (key, value, expires_at) VALUES ($1, $3, {ttl})
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
                 WHERE e.expires_at <= clock_timestamp()
                    OR (get_byte(e.value, 1) = 82 AND {TOKEN} = $2)
                    OR e.value = excluded.value
                 RETURNING 1",
                ttl = from_now(4)
            ),
            // $1 key, $2 token, $3 lease ms. Renews this owner's lease.
            extend: format!(
                "UPDATE {table} AS e SET expires_at = {lease}
                 WHERE e.key = $1 AND get_byte(e.value, 1) = 82 AND {TOKEN} = $2
                 RETURNING 1",
                lease = from_now(3)
            ),
            // $1 key, $2 token. Deletes this owner's running entry.
            abandon: format!(
                "DELETE FROM {table} AS e
                 WHERE e.key = $1 AND get_byte(e.value, 1) = 82 AND {TOKEN} = $2
                 RETURNING 1"
            ),
            get: format!(
                "SELECT value FROM {table} WHERE key = $1 AND expires_at > clock_timestamp()"
            ),
            // $1 key, $2 token, $3 record, $4 retention ms. In the tool's transaction: writes
            // the record over this owner's running row, and over nothing else, so that a lease
            // taken by another owner leaves the transaction nothing to commit.
            complete_in_transaction: format!(
                "UPDATE {table} AS e SET value = $3, expires_at = {retention}
                 WHERE e.key = $1 AND get_byte(e.value, 1) = 82 AND {TOKEN} = $2
                 RETURNING 1",
                retention = from_now(4)
            ),
            // $1 the key after which the page starts, $2 count. A page of the live rows, in the
            // order of the primary key's index, for an operator: each page costs its own rows.
            scan: format!(
                "SELECT key, value FROM {table} WHERE key > $1 AND expires_at > clock_timestamp()
                 ORDER BY key LIMIT $2"
            ),
            // $1 key. The intent's live record or tombstone, gone; never a running lease.
            remove: format!(
                "DELETE FROM {table} WHERE key = $1 AND expires_at > clock_timestamp()
                   AND get_byte(value, 1) <> 82"
            ),
            // $1 key, $2 record, $3 retention ms. An operator's resolution, over a record, a
            // tombstone or nothing; never over a live lease.
            put: format!(
                "INSERT INTO {table} AS e (key, value, expires_at) VALUES ($1, $2, {retention})
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
                 WHERE e.expires_at <= clock_timestamp() OR get_byte(e.value, 1) <> 82",
                retention = from_now(3)
            ),
            // $1 key. What a commit left, read once it is settled: the lock waits for a
            // transaction still committing.
            settled: format!("SELECT value FROM {table} WHERE key = $1 FOR UPDATE"),
            // $1 key, $2 window ms. One more call within the window the first call opened.
            count_call: format!(
                "INSERT INTO {calls} AS c (key, calls, ends_at) VALUES ($1, 1, {window})
                 ON CONFLICT (key) DO UPDATE SET
                   calls = CASE WHEN c.ends_at > clock_timestamp() THEN c.calls + 1 ELSE 1 END,
                   ends_at = CASE WHEN c.ends_at > clock_timestamp() THEN c.ends_at ELSE excluded.ends_at END
                 RETURNING calls",
                window = from_now(2)
            ),
            // A batch of rows a minute past their time: the table stays as large as what is live.
            sweep: format!(
                "DELETE FROM {table} WHERE key IN (SELECT key FROM {table}
                   WHERE expires_at < clock_timestamp() - interval '1 minute' LIMIT 1000)"
            ),
            sweep_calls: format!(
                "DELETE FROM {calls} WHERE key IN (SELECT key FROM {calls}
                   WHERE ends_at < clock_timestamp() - interval '1 minute' LIMIT 1000)"
            ),
        }
    }
}

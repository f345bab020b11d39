//! The Lua scripts that make each Redis operation one atomic round trip.
//!
//! Each intent is one key whose value is a [`codec`](super::super::codec) encoding: byte 1 is the
//! version, byte 2 the kind (`R` 82, `C` 67, `F` 70), bytes 3..18 the owner token of a running
//! entry. A running entry's TTL is its lease; a record's TTL is its retention.

use std::sync::LazyLock;

use redis::Script;

/// ARGV: running entry, lease ms. Returns the current value if it is running, completed or
/// unreadable; otherwise takes the lease and returns the tombstone it replaced, or nil. A retry
/// of the same claim (same token) finds its own entry and acquires again, so a claim whose
/// reply was lost can be resent.
pub(super) static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = redis.call('GET', KEYS[1])
if current then
  local kind = string.byte(current, 2)
  local own = kind == 82 and string.sub(current, 3, 18) == string.sub(ARGV[1], 3, 18)
  if not own and (string.byte(current, 1) ~= 1 or kind == 82 or kind == 67) then
    return current
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if current and string.byte(current, 2) == 70 then
  return current
end
return false
",
    )
});

/// ARGV: token, record, retention ms. Writes the record unless another owner runs the intent
/// or another record is kept. Returns 1 if written (or already this record), 0 if fenced.
pub(super) static COMPLETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = redis.call('GET', KEYS[1])
if current then
  local kind = string.byte(current, 2)
  if kind == 67 then
    if current == ARGV[2] then return 1 end
    return 0
  end
  if kind == 82 and string.sub(current, 3, 18) ~= ARGV[1] then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
",
    )
});

/// ARGV: token, tombstone, ttl ms. Replaces this owner's running entry (or nothing) with the
/// tombstone. Returns 1 if written (or already this tombstone), 0 if fenced.
pub(super) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = redis.call('GET', KEYS[1])
if current == ARGV[2] then
  return 1
end
if current then
  if string.byte(current, 2) ~= 82 or string.sub(current, 3, 18) ~= ARGV[1] then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
",
    )
});

/// ARGV: token, lease ms, running entry. Renews this owner's lease; puts the entry back if the
/// key vanished (a Redis restart without persistence). Returns 1 if held, 0 if fenced.
pub(super) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = redis.call('GET', KEYS[1])
if not current then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
  return 1
end
if string.byte(current, 2) == 82 and string.sub(current, 3, 18) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
",
    )
});

/// ARGV: token. Deletes this owner's running entry, if it holds one: a claim whose reply was
/// lost gives back what it may have taken. Returns 1 if deleted, 0 otherwise.
pub(super) static ABANDON: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = redis.call('GET', KEYS[1])
if current and string.byte(current, 2) == 82 and string.sub(current, 3, 18) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
",
    )
});

/// All scripts, to load them when a connection is made.
pub(super) fn all() -> [&'static Script; 5] {
    [&CLAIM, &COMPLETE, &RELEASE, &EXTEND, &ABANDON]
}

/// ARGV: window ms. Counts one more call of the intent (KEYS[1] is its count's own key) and
/// returns the count; the first call sets the window, so the count ends with it.
pub(super) static COUNT_CALL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return count
",
    )
});

/// No ARGV. An operator's removal: deletes a record or a tombstone, never a running entry.
/// Returns 1 if it deleted one.
pub(super) static REMOVE_SETTLED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = redis.call('GET', KEYS[1])
if not current or string.byte(current, 2) == 82 then
  return 0
end
return redis.call('DEL', KEYS[1])
",
    )
});

/// ARGV: record, retention ms. An operator's resolution: keeps the record over a record, a
/// tombstone or nothing, never over a running entry. Returns 1 if it wrote.
pub(super) static PUT_SETTLED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = redis.call('GET', KEYS[1])
if current and string.byte(current, 2) == 82 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
",
    )
});

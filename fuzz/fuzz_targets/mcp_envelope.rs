//! The MCP POST body's envelope and its `_meta`, read from arbitrary bytes: never panics, and
//! agrees with serde_json's reading of the same bytes on what a tool call is and names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tower_idempotency::fuzzing::check_envelope;

fuzz_target!(|data: &[u8]| check_envelope(data));

//! The record codec's decoding of any bytes a store could hold: never panics, and a value that
//! decodes encodes to bytes that decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tower_idempotency::fuzzing::check_record_decode;

fuzz_target!(|data: &[u8]| check_record_decode(data));

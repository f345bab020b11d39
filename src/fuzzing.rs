//! Entry points for the fuzz targets under `fuzz/`: the parsers of bytes from outside that
//! are not public on their own. Built only with `--cfg fuzzing` (which `cargo fuzz` sets),
//! so the crate's API is unchanged for its users.

use http::HeaderValue;

use crate::canonical::JsonPointer;
use crate::key::{ExplicitKey, FingerprintRules, InvalidExplicitKey};

#[cfg(feature = "mcp")]
pub use crate::mcp::fuzzing::{check_envelope, read_event_stream, unfinished_event};
pub use crate::store::fuzzing::check_record_decode;

/// The explicit key a JSON body carries at `pointer`, as a layer with `key_field(pointer)`
/// reads it: `None` where the body has nothing there or is not JSON the layer can read.
pub fn key_field(
    pointer: &JsonPointer,
    body: &[u8],
) -> Option<Result<ExplicitKey, InvalidExplicitKey>> {
    let rules = FingerprintRules {
        key_field: Some(pointer.clone()),
        ..FingerprintRules::default()
    };
    let json = HeaderValue::from_static("application/json");
    rules.fingerprint(Some(&json), body).key_field
}

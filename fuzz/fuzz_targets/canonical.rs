//! Canonicalisation of arbitrary bytes: never panics; whatever has a canonical form is a
//! fixed point, valid JSON, and hashes as its bytes do.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};
use tower_idempotency::canonical::{canonical_sha256, to_canonical_vec};

fuzz_target!(|data: &[u8]| {
    let Ok(canonical) = to_canonical_vec(data) else {
        return;
    };
    assert_eq!(to_canonical_vec(&canonical).as_deref(), Ok(&canonical[..]), "a fixed point");
    // JSON's grammar, checked without holding the numbers: an integer's exact digits may be
    // past a double's range, which serde_json's `Value` refuses.
    assert!(
        serde_json::from_slice::<serde::de::IgnoredAny>(&canonical).is_ok(),
        "valid JSON"
    );
    let streamed = canonical_sha256(data).expect("the same input canonicalises again");
    assert_eq!(streamed, <[u8; 32]>::from(Sha256::digest(&canonical)));
});

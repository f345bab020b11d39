//! Canonical fingerprinting against its baselines, in one run: parsing alone with serde_json
//! (with its `Value` dropped outside the timing, as divan does with what a benchmark returns,
//! and inside it), and serde_jcs canonicalisation followed by SHA-256.
//!
//! `cargo bench --bench fingerprint`

use divan::counter::BytesCount;
use divan::{black_box, Bencher};
use sha2::{Digest, Sha256};

#[path = "support.rs"]
mod support;

const SIZES: &[usize] = &[1024, 3 * 1024, 300 * 1024];

fn main() {
    divan::main();
}

#[divan::bench(args = SIZES)]
fn canonical_sha256(bencher: Bencher, size: usize) {
    let doc = support::document(size, 1);
    bencher.counter(BytesCount::new(doc.len())).bench(|| {
        tower_idempotency::canonical::canonical_sha256(black_box(doc.as_bytes())).unwrap()
    });
}

#[divan::bench(args = SIZES)]
fn serde_jcs_then_sha256(bencher: Bencher, size: usize) {
    let doc = support::document(size, 1);
    bencher.counter(BytesCount::new(doc.len())).bench(|| {
        let value: serde_json::Value = serde_json::from_slice(black_box(doc.as_bytes())).unwrap();
        Sha256::digest(serde_jcs::to_vec(&value).unwrap())
    });
}

#[divan::bench(args = SIZES)]
fn serde_json_parse_only(bencher: Bencher, size: usize) {
    let doc = support::document(size, 1);
    bencher
        .counter(BytesCount::new(doc.len()))
        .bench(|| serde_json::from_slice::<serde_json::Value>(black_box(doc.as_bytes())).unwrap());
}

/// The same parse with its `Value` dropped inside the timed loop, as the canonical fingerprint
/// frees its own tree inside its call: divan drops what a benchmark returns outside its
/// timing, so the row above leaves out freeing every map and string the parse made.
#[divan::bench(args = SIZES)]
fn serde_json_parse_and_drop(bencher: Bencher, size: usize) {
    let doc = support::document(size, 1);
    bencher.counter(BytesCount::new(doc.len())).bench(|| {
        drop(serde_json::from_slice::<serde_json::Value>(black_box(doc.as_bytes())).unwrap())
    });
}

#[divan::bench(args = SIZES)]
fn canonical_to_vec_no_hash(bencher: Bencher, size: usize) {
    let doc = support::document(size, 1);
    bencher.counter(BytesCount::new(doc.len())).bench(|| {
        tower_idempotency::canonical::to_canonical_vec(black_box(doc.as_bytes())).unwrap()
    });
}

#[divan::bench(args = SIZES)]
fn sha256_of_raw_bytes(bencher: Bencher, size: usize) {
    let doc = support::document(size, 1);
    bencher
        .counter(BytesCount::new(doc.len()))
        .bench(|| Sha256::digest(black_box(doc.as_bytes())));
}

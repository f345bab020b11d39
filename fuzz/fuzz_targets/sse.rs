//! The event-stream reader of the MCP relay, fed one stream in chunks three ways: whole, a
//! byte at a time, and cut after the bytes the input's first eight bytes mark (bit `i % 64`
//! for byte `i`). What it reads, where the stream stands and the bytes the per-event bound
//! holds are the same however the bytes arrive.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tower_idempotency::fuzzing::{read_event_stream, unfinished_event};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

/// `stream` cut after each byte whose bit is set in `marks`.
fn cut<'a>(stream: &'a [u8], marks: u64) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for at in 0..stream.len() {
        if marks >> (at % 64) & 1 == 1 {
            chunks.push(&stream[start..=at]);
            start = at + 1;
        }
    }
    if start < stream.len() {
        chunks.push(&stream[start..]);
    }
    chunks
}

fn read(chunks: &[&[u8]]) -> String {
    let owned = chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect();
    runtime().block_on(read_event_stream(owned, usize::MAX))
}

fuzz_target!(|data: &[u8]| {
    let Some((marks, stream)) = data.split_first_chunk::<8>() else {
        return;
    };
    let whole = [stream];
    let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
    let marked = cut(stream, u64::from_le_bytes(*marks));
    let expected = read(&whole);
    let held = unfinished_event(&whole);
    for chunks in [&bytewise, &marked] {
        assert_eq!(read(chunks), expected, "read in {} chunks", chunks.len());
        assert_eq!(
            unfinished_event(chunks),
            held,
            "held in {} chunks",
            chunks.len()
        );
    }
});

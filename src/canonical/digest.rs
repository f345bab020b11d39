//! SHA-256 of a canonical form, fed in blocks rather than token by token.

use sha2::{Digest, Sha256};

use super::Sink;

/// Bytes gathered before they are hashed: canonical output arrives a few bytes at a time, and
/// each hasher call has a fixed cost that a copy into this buffer does not. Eight blocks of
/// SHA-256 per call keep that cost small, and a sink this size is cheap to make (one of 4 KiB,
/// zeroed and moved for every fingerprint, cost more than it saved on a body of 1 KiB).
const BLOCK: usize = 512;

/// A sink that hashes what it is given, in blocks of [`BLOCK`] bytes.
pub(crate) struct HashingSink {
    hasher: Sha256,
    buffer: [u8; BLOCK],
    filled: usize,
}

impl HashingSink {
    /// A sink whose hash starts with `tag`.
    pub(crate) fn new(tag: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(tag);
        Self {
            hasher,
            buffer: [0; BLOCK],
            filled: 0,
        }
    }

    fn flush(&mut self) {
        self.hasher.update(&self.buffer[..self.filled]);
        self.filled = 0;
    }

    /// Hashes what the buffer holds, then `bytes`: once every few hundred bytes, so kept out of
    /// line, where it does not weigh on the writer's loops that inline [`Sink::put`].
    #[cold]
    #[inline(never)]
    fn put_past_the_buffer(&mut self, bytes: &[u8]) {
        self.flush();
        if bytes.len() >= BLOCK {
            self.hasher.update(bytes);
        } else {
            self.buffer[..bytes.len()].copy_from_slice(bytes);
            self.filled = bytes.len();
        }
    }

    /// The digest of everything put in; the sink then starts again, empty and untagged.
    ///
    /// Borrowed rather than taken: taking the sink (over 600 bytes) copied it into the call.
    pub(crate) fn finish(&mut self) -> [u8; 32] {
        self.flush();
        self.hasher.finalize_reset().into()
    }
}

impl Sink for HashingSink {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        if let Some(free) = self.buffer.get_mut(self.filled..self.filled + bytes.len()) {
            copy_short(free, bytes);
            self.filled += bytes.len();
            return;
        }
        self.put_past_the_buffer(bytes);
    }
}

/// Copies `from` into `to`, of the same length, without a call for the short pieces a
/// canonical form is written in (names, punctuation, short values): two overlapping copies of
/// a fixed width cover any length from that width to twice it, where a copy of a length known
/// only at run time is a call into the C library's `memcpy`.
#[inline(always)]
fn copy_short(to: &mut [u8], from: &[u8]) {
    fn overlapping<const WIDTH: usize>(to: &mut [u8], from: &[u8]) {
        let n = from.len();
        let head: [u8; WIDTH] = from[..WIDTH].try_into().expect("WIDTH bytes");
        let tail: [u8; WIDTH] = from[n - WIDTH..].try_into().expect("WIDTH bytes");
        to[..WIDTH].copy_from_slice(&head);
        to[n - WIDTH..n].copy_from_slice(&tail);
    }
    match from.len() {
        0 => {}
        1..=3 => {
            for (to, from) in to.iter_mut().zip(from) {
                *to = *from;
            }
        }
        4..=7 => overlapping::<4>(to, from),
        8..=15 => overlapping::<8>(to, from),
        16..=32 => overlapping::<16>(to, from),
        _ => to.copy_from_slice(from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_copy_copies_every_length_exactly() {
        let from: Vec<u8> = (1..=80u8).collect();
        for len in 0..=from.len() {
            let mut to = vec![0u8; len];
            copy_short(&mut to, &from[..len]);
            assert_eq!(to, from[..len], "{len} bytes");
        }
    }

    #[test]
    fn pieces_of_every_length_hash_like_one_update() {
        let data: Vec<u8> = (0..4_000u32).map(|i| (i % 251) as u8).collect();
        let mut sink = HashingSink::new(b"tag");
        let mut expected = Sha256::new();
        expected.update(b"tag");
        let mut at = 0;
        for len in (0..=40).cycle().take(300) {
            let piece = &data[at % 2_000..at % 2_000 + len];
            sink.put(piece);
            expected.update(piece);
            at += len;
        }
        assert_eq!(sink.finish(), <[u8; 32]>::from(expected.finalize()));
    }

    #[test]
    fn blocks_hash_like_one_update() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let mut sink = HashingSink::new(b"tag");
        for chunk in data.chunks(7).chain([&data[..5000]]) {
            sink.put(chunk);
        }
        let mut expected = Sha256::new();
        expected.update(b"tag");
        expected.update(&data);
        expected.update(&data[..5000]);
        assert_eq!(sink.finish(), <[u8; 32]>::from(expected.finalize()));
    }
}

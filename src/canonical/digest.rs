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

    /// The digest of everything put in; the sink then starts again, empty and untagged.
    ///
    /// Borrowed rather than taken: taking the sink (over 600 bytes) copied it into the call.
    pub(crate) fn finish(&mut self) -> [u8; 32] {
        self.flush();
        self.hasher.finalize_reset().into()
    }
}

impl Sink for HashingSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if let Some(free) = self.buffer.get_mut(self.filled..self.filled + bytes.len()) {
            free.copy_from_slice(bytes);
            self.filled += bytes.len();
            return;
        }
        self.flush();
        if bytes.len() >= BLOCK {
            self.hasher.update(bytes);
        } else {
            self.buffer[..bytes.len()].copy_from_slice(bytes);
            self.filled = bytes.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

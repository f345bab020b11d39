//! Owner tokens: proof that a writer still holds the intent it claimed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// 16 bytes handed out by a successful claim: 8 random bytes drawn once per process, then a
/// counter. Unique across processes and claims without a system call per claim; a token only
/// needs to be unique to fence, not secret.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken([u8; 16]);

/// The 8 random bytes this process draws once: its tokens' first half, and its
/// [`Instance`](super::Instance)'s first four.
pub(super) fn process_nonce() -> [u8; 8] {
    static NONCE: OnceLock<[u8; 8]> = OnceLock::new();
    *NONCE.get_or_init(|| {
        let mut nonce = [0u8; 8];
        if getrandom::fill(&mut nonce).is_err() {
            // No OS randomness: time and process id still tell processes apart.
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nonce = (nanos ^ (u64::from(std::process::id()) << 32)).to_be_bytes();
        }
        nonce
    })
}

impl OwnerToken {
    /// A fresh token, unique across processes.
    pub fn generate() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&process_nonce());
        bytes[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
        Self(bytes)
    }

    /// Builds a token from its bytes (for stores that read tokens back).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The token's bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerToken({}…)", hex::encode(&self.0[8..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct() {
        let tokens: std::collections::HashSet<_> =
            (0..1000).map(|_| OwnerToken::generate()).collect();
        assert_eq!(tokens.len(), 1000);
    }
}

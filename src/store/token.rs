//! Owner tokens: proof that a writer still holds the intent it claimed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// 16 random bytes handed out by a successful claim.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken([u8; 16]);

impl OwnerToken {
    /// A fresh token, unique across processes.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            // No OS randomness: time, process and a counter are still unique enough to fence.
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            bytes[..8].copy_from_slice(&nanos.to_be_bytes());
            bytes[8..12].copy_from_slice(&std::process::id().to_be_bytes());
            let count = COUNTER.fetch_add(1, Ordering::Relaxed) as u32;
            bytes[12..].copy_from_slice(&count.to_be_bytes());
        }
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
        write!(f, "OwnerToken({}…)", hex::encode(&self.0[..4]))
    }
}

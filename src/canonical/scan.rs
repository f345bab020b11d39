//! Finding where the plain text of a JSON string ends.

use super::CanonicalError;

const CONTROL_CHARACTER: CanonicalError = CanonicalError::Syntax("control character in a string");

/// Length of the plain text at the start of `bytes`, up to the next quote or backslash; a
/// control character inside it, or no end at all, is an error.
///
/// Most strings of a tool call are short (member names, ids, flags): their first
/// [`SHORT_RUN`] bytes are read a word at a time, which finds the end before `memchr`'s
/// vector loop would have started. What is longer goes to `memchr`, whose control check has
/// no early exit so that it vectorises too: long text is most of a tool call's bytes.
/// Inlined into the parser, which calls it for every name and string: a call of its own,
/// saving registers and returning its result through memory, took about 3% of a fingerprint.
#[inline(always)]
pub(super) fn plain_run(bytes: &[u8]) -> Result<usize, CanonicalError> {
    let head = bytes.len().min(SHORT_RUN);
    let mut at = 0;
    while at + 8 <= head {
        let word = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
        let special = special_bytes(word);
        if special != 0 {
            return run_ends_at(bytes, at + (special.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    while at < head {
        if matches!(bytes[at], b'"' | b'\\' | 0x00..=0x1f) {
            return run_ends_at(bytes, at);
        }
        at += 1;
    }
    let end = at
        + memchr::memchr2(b'"', b'\\', &bytes[at..])
            .ok_or(CanonicalError::Syntax("unterminated string"))?;
    let has_control = bytes[at..end]
        .iter()
        .fold(false, |found, &b| found | (b < 0x20));
    if has_control {
        return Err(CONTROL_CHARACTER);
    }
    Ok(end)
}

/// How much of a string is scanned a word at a time before `memchr` takes over.
const SHORT_RUN: usize = 32;

/// Marks, in each byte's high bit, the bytes of `word` that are a quote, a backslash or a
/// control character. A mark can be wrong only above a right one (a borrow runs upwards), so
/// the lowest mark is always the first such byte.
fn special_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let below = |value: u64, bound: u8| value.wrapping_sub(ONES * u64::from(bound)) & !value;
    (below(word ^ (ONES * u64::from(b'"')), 1)
        | below(word ^ (ONES * u64::from(b'\\')), 1)
        | below(word, 0x20))
        & HIGH_BITS
}

/// The run ends at `at`, on a quote or a backslash; a control character there is an error.
fn run_ends_at(bytes: &[u8], at: usize) -> Result<usize, CanonicalError> {
    if bytes[at] < 0x20 {
        return Err(CONTROL_CHARACTER);
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `plain_run` must find, byte by byte: the first quote or backslash, with no
    /// control character before it.
    fn plain_run_by_bytes(bytes: &[u8]) -> Option<usize> {
        let at = bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        (bytes[at] >= 0x20).then_some(at)
    }

    fn string_bytes() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            24 => 0x20u8..0x7f,
            4 => 0x80u8..=0xff,
            1 => Just(b'"'),
            1 => Just(b'\\'),
            1 => 0u8..0x20,
        ];
        prop::collection::vec(byte, 0..120)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The word-at-a-time scan and `memchr` together end a run where a byte-by-byte scan
        /// does, and refuse what it refuses, at every length and position.
        #[test]
        fn a_plain_run_ends_where_a_byte_by_byte_scan_ends(bytes in string_bytes()) {
            prop_assert_eq!(plain_run(&bytes).ok(), plain_run_by_bytes(&bytes));
        }
    }

    #[test]
    fn a_special_byte_is_found_in_every_place_of_a_word() {
        // Every other byte is a near miss: a high bit set, a neighbour of a quote or of a
        // backslash, the control bound itself.
        const NEAR_MISSES: [u8; 7] = [0x80, 0x20, 0x23, 0x5b, 0x5d, 0xa2, 0xdc];
        for special in [b'"', b'\\', 0x00, 0x1f] {
            for at in 0..SHORT_RUN + 9 {
                let mut bytes: Vec<u8> = NEAR_MISSES
                    .iter()
                    .copied()
                    .cycle()
                    .take(SHORT_RUN + 16)
                    .collect();
                bytes[at] = special;
                assert_eq!(
                    plain_run(&bytes).ok(),
                    plain_run_by_bytes(&bytes),
                    "{special} at {at}"
                );
            }
        }
    }
}

//! Member order of RFC 8785: names compared as sequences of UTF-16 code units.

use std::cmp::Ordering;

/// Compares two names by their UTF-16 code units without transcoding them.
///
/// UTF-8 byte order equals code point order, which differs from UTF-16 order only where a
/// character above U+FFFF (a surrogate pair, 0xD800..) meets one in U+E000..=U+FFFF. So the
/// bytes decide, and only at the first differing character is its UTF-16 lead unit consulted.
pub(crate) fn utf16_cmp(a: &str, b: &str) -> Ordering {
    let first_difference = a.bytes().zip(b.bytes()).position(|(x, y)| x != y);
    let Some(mut at) = first_difference else {
        return a.len().cmp(&b.len());
    };
    // Where either differing byte is ASCII, it starts a character below U+0080 on its side,
    // so the bytes order the two in UTF-16 as well (most member names are ASCII).
    let (x, y) = (a.as_bytes()[at], b.as_bytes()[at]);
    if x.is_ascii() || y.is_ascii() {
        return x.cmp(&y);
    }
    while !a.is_char_boundary(at) {
        at -= 1;
    }
    // Both strings share the bytes before `at`, so both have a character there.
    let (Some(x), Some(y)) = (a[at..].chars().next(), b[at..].chars().next()) else {
        return a.len().cmp(&b.len());
    };
    lead_unit(x).cmp(&lead_unit(y)).then(x.cmp(&y))
}

fn lead_unit(c: char) -> u32 {
    let code = c as u32;
    if code < 0x10000 {
        code
    } else {
        0xD800 + ((code - 0x10000) >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn supplementary_characters_sort_before_the_top_of_the_bmp() {
        assert_eq!(utf16_cmp("\u{1F602}", "\u{FB33}"), Ordering::Less);
        assert_eq!(utf16_cmp("\u{20AC}", "\u{1F602}"), Ordering::Less);
        assert_eq!(utf16_cmp("a", "ab"), Ordering::Less);
    }

    proptest! {
        #[test]
        fn agrees_with_transcoding_to_utf16(a in "\\PC{0,6}", b in "\\PC{0,6}") {
            prop_assert_eq!(utf16_cmp(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }
    }
}

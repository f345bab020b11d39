//! Numbers in canonical form.
//!
//! Integer literals (no fraction, no exponent) keep their exact digits: inside ±2^53 these
//! digits are already what RFC 8785 prints, and outside it rounding through an f64 would merge
//! two amounts an upstream can tell apart. Every other number is parsed as an IEEE 754 double
//! and printed in ECMAScript's shortest round-trip form, as RFC 8785 requires.
//!
//! Typed parsers (serde_json, Python's `json`) read `1` as an integer and `1.0` as a float, so
//! by default the two kinds stay apart: a double whose shortest form looks like an integer is
//! written with `.0` (`1.0`, `100.0`, `-0.0`), and `-0` stays `-0`. [`NumberKinds::Merged`]
//! writes both kinds as RFC 8785 does, for upstreams that cannot tell them apart.

use super::{CanonicalError, Sink};

/// Whether an integer literal and a number written with a fraction or an exponent can be one
/// intent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum NumberKinds {
    /// `1` and `1.0`, `100` and `1e2`, `0` and `-0` stay apart, as typed parsers read them
    /// (the default). Numbers with a fraction or an exponent follow RFC 8785 among themselves:
    /// `1.0`, `1.00` and `10E-1` are one.
    #[default]
    Distinct,
    /// Numbers are written as RFC 8785 writes them: `1`, `1.0` and `1e0` are one, as a
    /// JavaScript upstream reads them. Integers beyond ±2^53 still keep their digits.
    Merged,
}

/// Writes an integer literal taken verbatim from the document; merged, `-0` becomes `0`.
pub(super) fn write_integer(digits: &str, kinds: NumberKinds, out: &mut impl Sink) {
    if digits == "-0" && kinds == NumberKinds::Merged {
        out.put(b"0");
    } else {
        out.put(digits.as_bytes());
    }
}

/// Writes a double in ECMAScript `Number.prototype.toString` form, marked as a double where
/// the kinds stay apart; non-finite values have no JSON spelling and are refused.
pub(super) fn write_double(
    value: f64,
    kinds: NumberKinds,
    out: &mut impl Sink,
) -> Result<(), CanonicalError> {
    if !value.is_finite() {
        return Err(CanonicalError::NumberOutOfRange);
    }
    let distinct = kinds == NumberKinds::Distinct;
    if value == 0.0 {
        // Both zeros print as "0" in ECMAScript; apart, each keeps its sign.
        out.put(match (distinct, value.is_sign_negative()) {
            (false, _) => b"0",
            (true, false) => b"0.0",
            (true, true) => b"-0.0",
        });
        return Ok(());
    }
    let mut buffer = ryu_js::Buffer::new();
    let text = buffer.format_finite(value);
    out.put(text.as_bytes());
    if distinct && !text.bytes().any(|b| b == b'.' || b == b'e') {
        out.put(b".0");
    }
    Ok(())
}

/// Most significant digits a decimal may have and still be the only one of its length or
/// shorter that rounds to its double: any two decimals of at most 15 significant digits round
/// to two doubles (IEEE 754 binary64 carries 15.95 decimal digits).
const UNIQUE_DIGITS: usize = 15;
/// Most zeros between the point and the first significant digit that ECMAScript still prints
/// in plain notation: `0.000001` stays, `0.0000001` is `1e-7`.
const MOST_LEADING_ZEROS: usize = 5;

/// Whether a JSON number literal with a fraction, as the parser accepted it (so with no
/// leading zero), is already in the form RFC 8785 prints for its double, so that parsing and printing it again would give back the same text: no exponent,
/// at most 15 significant digits, a fraction that does not end in 0, and no more leading
/// zeros than ECMAScript prints in plain notation. Its double is then the nearest to it, no
/// shorter decimal rounds to the same double (it would have at most 15 digits too), and
/// ECMAScript writes its digits with the point where the literal has it. Everything else goes
/// through the double.
pub(super) fn is_canonical_decimal(literal: &str) -> bool {
    let unsigned = literal.strip_prefix('-').unwrap_or(literal);
    let Some((whole, fraction)) = unsigned.split_once('.') else {
        return false;
    };
    let plain = |digits: &str| digits.bytes().all(|b| b.is_ascii_digit());
    if !plain(whole) || !plain(fraction) || !fraction.ends_with(|c: char| c != '0') {
        return false;
    }
    let significant = if whole == "0" {
        let leading_zeros = fraction.len() - fraction.trim_start_matches('0').len();
        if leading_zeros > MOST_LEADING_ZEROS {
            return false;
        }
        fraction.len() - leading_zeros
    } else {
        whole.len() + fraction.len()
    };
    significant <= UNIQUE_DIGITS
}

/// Parses the text of a number literal that has a fraction or an exponent.
pub(super) fn parse_double(literal: &str) -> Result<f64, CanonicalError> {
    let value: f64 = literal
        .parse()
        .map_err(|_| CanonicalError::Syntax("malformed number"))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(CanonicalError::NumberOutOfRange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn double(bits: u64) -> String {
        double_as(f64::from_bits(bits), NumberKinds::Merged)
    }

    fn double_as(value: f64, kinds: NumberKinds) -> String {
        let mut out = Vec::new();
        write_double(value, kinds, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The sample values of RFC 8785, Appendix B (IEEE 754 bit patterns and their canonical text).
    #[test]
    fn doubles_print_as_in_rfc_8785_appendix_b() {
        let samples: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, expected) in samples {
            assert_eq!(double(*bits), *expected, "bits {bits:#018x}");
        }
    }

    #[test]
    fn non_finite_doubles_are_refused() {
        let mut out = Vec::new();
        assert_eq!(
            write_double(f64::NAN, NumberKinds::Distinct, &mut out),
            Err(CanonicalError::NumberOutOfRange)
        );
        assert_eq!(parse_double("1e400"), Err(CanonicalError::NumberOutOfRange));
    }

    #[test]
    fn negative_zero_integer_is_zero_only_when_kinds_merge() {
        let mut out = Vec::new();
        write_integer("-0", NumberKinds::Merged, &mut out);
        assert_eq!(out, b"0");
        let mut out = Vec::new();
        write_integer("-0", NumberKinds::Distinct, &mut out);
        assert_eq!(out, b"-0");
    }

    #[test]
    fn decimals_printed_otherwise_go_through_the_double() {
        for literal in [
            "1.10",
            "1.0",
            "0.0",
            "-0.0",
            "0.0000001",
            "1e5",
            "1.5e3",
            "0.1234567890123456",
            "1234567890.123456",
            "12",
        ] {
            assert!(!is_canonical_decimal(literal), "{literal}");
        }
        for literal in [
            "1.5",
            "-0.25",
            "0.000001",
            "123456789012.345",
            "0.100000000000001",
        ] {
            assert!(is_canonical_decimal(literal), "{literal}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// A literal kept as written is exactly what parsing it and printing its double gives,
        /// whether the kinds stay apart or merge.
        #[test]
        fn a_decimal_kept_as_written_prints_as_its_double_does(
            negative in proptest::bool::ANY,
            whole in "(0|[1-9][0-9]{0,16})",
            fraction in "[0-9]{0,17}[1-9]",
        ) {
            let sign = if negative { "-" } else { "" };
            let literal = format!("{sign}{whole}.{fraction}");
            if is_canonical_decimal(&literal) {
                let value = parse_double(&literal).unwrap();
                proptest::prop_assert_eq!(double_as(value, NumberKinds::Distinct), literal.clone());
                proptest::prop_assert_eq!(double_as(value, NumberKinds::Merged), literal);
            }
        }
    }

    #[test]
    fn doubles_that_look_like_integers_are_marked_when_kinds_stay_apart() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.5, "1.5"),
            (1e21, "1e+21"),
            (1e-7, "1e-7"),
            (9007199254740992.0, "9007199254740992.0"),
        ];
        for (value, expected) in cases {
            assert_eq!(double_as(*value, NumberKinds::Distinct), *expected);
        }
        assert_eq!(double_as(100.0, NumberKinds::Merged), "100");
        assert_eq!(double_as(-0.0, NumberKinds::Merged), "0");
    }
}

use proptest::prelude::*;
use serde_json::Value;

use super::*;

fn canonical(json: &str) -> String {
    String::from_utf8(to_canonical_vec(json.as_bytes()).unwrap()).unwrap()
}

/// The canonical form with numbers merged as RFC 8785 writes them.
fn rfc8785(json: &str) -> String {
    String::from_utf8(to_canonical_vec_with(json.as_bytes(), NumberKinds::Merged).unwrap()).unwrap()
}

/// Input and expected output of the reference test data published with RFC 8785.
#[test]
fn matches_the_rfc_8785_reference_test_data() {
    let cases: &[(&str, &str)] = &[
        (
            // values.json
            "{\n  \"numbers\": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001],\n  \"escaping\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n  \"literals\": [null, true, false]\n}",
            "{\"escaping\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\",\"literals\":[null,true,false],\"numbers\":[1e+30,4.5,333333333.3333333,0.002,1e-27]}",
        ),
        (
            // weird.json
            "{\n  \"\\u20ac\": \"Euro Sign\",\n  \"1\": \"One\",\n  \"\\u0080\": \"Control\\u007f\",\n  \"\\ud83d\\ude02\": \"Smiley\",\n  \"\\u00f6\": \"Latin Small Letter O With Diaeresis\",\n  \"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\",\n  \"</script>\": \"Browser Challenge\"\n}\n",
            "{\"1\":\"One\",\"</script>\":\"Browser Challenge\",\"\u{80}\":\"Control\u{7f}\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f602}\":\"Smiley\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
        ),
        (
            // structures.json
            "{\n  \"1\": {\"f\": {\"f\": \"hi\",\"F\": 5} ,\"\\n\": 56.0},\n  \"10\": { },\n  \"\": \"empty\",\n  \"a\": { },\n  \"111\": [ { } ],\n  \"A\": { }\n}",
            "{\"\":\"empty\",\"1\":{\"\\n\":56,\"f\":{\"F\":5,\"f\":\"hi\"}},\"10\":{},\"111\":[{}],\"A\":{},\"a\":{}}",
        ),
        (
            // french.json
            "{\n  \"peach\": \"This sorting order\",\n  \"p\u{e9}ch\u{e9}\": \"is wrong according to French\",\n  \"p\u{ea}che\": \"but canonicalization MUST\",\n  \"sin\":   \"ingnore locale\"\n}\n",
            "{\"peach\":\"This sorting order\",\"p\u{e9}ch\u{e9}\":\"is wrong according to French\",\"p\u{ea}che\":\"but canonicalization MUST\",\"sin\":\"ingnore locale\"}",
        ),
        (
            // unicode.json: no Unicode normalisation.
            "{\n  \"Unnormalized Unicode\":\"\\u1e0d\\u0307\"\n}\n",
            "{\"Unnormalized Unicode\":\"\u{1e0d}\u{307}\"}",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(rfc8785(input), *expected);
    }
    // Kinds apart, the one double the data writes like an integer keeps its mark.
    assert!(canonical(cases[2].0).contains(r#""\n":56.0"#));
}

#[test]
fn integers_beyond_two_to_the_53_keep_their_digits() {
    assert_eq!(canonical("9007199254740993"), "9007199254740993");
    assert_ne!(canonical("9007199254740993"), canonical("9007199254740992"));
    assert_eq!(
        canonical("-123456789012345678901234567890"),
        "-123456789012345678901234567890"
    );
    assert_eq!(rfc8785("9007199254740993"), "9007199254740993");
    // With a fraction the RFC's rounding applies.
    assert_eq!(canonical("9007199254740993.0"), "9007199254740992.0");
    assert_eq!(rfc8785("9007199254740993.0"), "9007199254740992");
}

#[test]
fn number_spellings_of_one_value_and_kind_agree() {
    for spelling in ["1.5", "1.50", "15e-1", "0.15E+1", "1.5e0"] {
        assert_eq!(canonical(spelling), "1.5", "{spelling}");
        assert_eq!(rfc8785(spelling), "1.5", "{spelling}");
    }
    for spelling in ["100.0", "1e2", "1E+2", "10e1"] {
        assert_eq!(canonical(spelling), "100.0", "{spelling}");
        assert_eq!(rfc8785(spelling), "100", "{spelling}");
    }
    assert_eq!(canonical("100"), "100");
    assert_eq!(rfc8785("100"), "100");
    assert_eq!((canonical("-0"), canonical("0")), ("-0".into(), "0".into()));
    assert_eq!(
        (canonical("-0.0"), canonical("0e0")),
        ("-0.0".into(), "0.0".into())
    );
    for zero in ["-0", "0", "-0.0", "0.0", "0e5"] {
        assert_eq!(rfc8785(zero), "0", "{zero}");
    }
}

#[test]
fn control_characters_use_the_minimal_escapes() {
    assert_eq!(
        canonical(r#""\u0000\u0008\u0009\u000a\u000c\u000d\u001f\u007f\u2028""#),
        "\"\\u0000\\b\\t\\n\\f\\r\\u001f\u{7f}\u{2028}\""
    );
}

/// Values on which the RFC and this crate agree: no integer beyond ±2^53, finite doubles.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53)..=(1i64 << 53)).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |d| d.is_finite())
            .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\/\u{7f}\u{80}\u{2028}\u{fffd}\u{1f600}]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,5}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Writes `value` as JSON with choices driven by `seed`: member order, whitespace, `\u`
/// escapes and number spellings all vary, the meaning does not.
pub(crate) fn respell(value: &Value, seed: &mut u64, out: &mut String) {
    respell_numbers(value, seed, true, out);
}

/// Like [`respell`]; with `keep_kinds` off, integers may be spelled with a fraction or an
/// exponent too (the same value to RFC 8785, another kind to a typed parser).
pub(crate) fn respell_numbers(value: &Value, seed: &mut u64, keep_kinds: bool, out: &mut String) {
    fn next(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }
    fn space(seed: &mut u64, out: &mut String) {
        out.push_str([" ", "", "\n\t", "\r\n  ", ""][(next(seed) % 5) as usize]);
    }
    fn string(text: &str, seed: &mut u64, out: &mut String) {
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 || next(seed).is_multiple_of(3) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                '/' if next(seed).is_multiple_of(2) => out.push_str("\\/"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    space(seed, out);
    match value {
        Value::Number(n) if keep_kinds && !n.is_f64() => out.push_str(&n.to_string()),
        Value::Number(n) => {
            let text = n.to_string();
            let spelled = match next(seed) % 3 {
                1 if !text.contains(['e', 'E']) => {
                    if text.contains('.') {
                        format!("{text}00")
                    } else {
                        format!("{text}.0")
                    }
                }
                2 if !text.contains(['e', 'E']) => format!("{text}E0"),
                _ => text,
            };
            out.push_str(&spelled);
        }
        Value::String(s) => string(s, seed, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                respell_numbers(item, seed, keep_kinds, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            let len = members.len();
            for i in (1..len).rev() {
                members.swap(i, (next(seed) % (i as u64 + 1)) as usize);
            }
            out.push('{');
            for (i, (name, member)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(seed, out);
                string(name, seed, out);
                space(seed, out);
                out.push(':');
                respell_numbers(member, seed, keep_kinds, out);
            }
            space(seed, out);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
    space(seed, out);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn merged_numbers_agree_with_serde_jcs(value in json_value()) {
        let text = serde_json::to_vec(&value).unwrap();
        let ours = to_canonical_vec_with(&text, NumberKinds::Merged).unwrap();
        let oracle = serde_jcs::to_vec(&value).unwrap();
        prop_assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(oracle).unwrap());
    }

    #[test]
    fn any_spelling_of_a_document_that_keeps_number_kinds_has_one_canonical_form(
        value in json_value(),
        seed in any::<u64>(),
    ) {
        let plain = to_canonical_vec(&serde_json::to_vec(&value).unwrap()).unwrap();
        let mut text = String::new();
        let mut state = seed;
        respell(&value, &mut state, &mut text);
        let respelled = to_canonical_vec(text.as_bytes())
            .unwrap_or_else(|e| panic!("{e} in {text:?}"));
        prop_assert_eq!(plain, respelled, "{}", text);
    }

    #[test]
    fn merged_any_spelling_of_a_value_has_one_canonical_form(
        value in json_value(),
        seed in any::<u64>(),
    ) {
        let merged = |text: &[u8]| to_canonical_vec_with(text, NumberKinds::Merged).unwrap();
        let plain = merged(&serde_json::to_vec(&value).unwrap());
        let mut text = String::new();
        let mut state = seed;
        respell_numbers(&value, &mut state, false, &mut text);
        prop_assert_eq!(plain, merged(text.as_bytes()), "{}", text);
    }

    #[test]
    fn an_integer_and_the_same_value_with_a_fraction_or_exponent_are_apart(
        n in -(1i64 << 53)..=(1i64 << 53),
        exponent in any::<bool>(),
    ) {
        let integer = n.to_string();
        let double = if exponent { format!("{n}e0") } else { format!("{n}.0") };
        prop_assert_ne!(canonical(&integer), canonical(&double));
        prop_assert_eq!(rfc8785(&integer), rfc8785(&double));
    }

    #[test]
    fn canonical_form_is_a_fixed_point_in_both_modes(value in json_value()) {
        for kinds in [NumberKinds::Distinct, NumberKinds::Merged] {
            let once = to_canonical_vec_with(&serde_json::to_vec(&value).unwrap(), kinds).unwrap();
            let twice = to_canonical_vec_with(&once, kinds).unwrap();
            prop_assert_eq!(once, twice);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = to_canonical_vec(&bytes);
    }
}

use super::*;
use crate::canonical::tests::{json_value, respell};
use proptest::prelude::*;

/// Values an upstream reads exactly: integers, strings, literals; no doubles to round.
fn exact_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]{0,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn equal_meaning_gives_an_equal_fingerprint(value in json_value(), seed in any::<u64>()) {
        let rules = FingerprintRules::default();
        let plain = serde_json::to_vec(&value).unwrap();
        let mut spelled = String::new();
        let mut state = seed;
        respell(&value, &mut state, &mut spelled);
        prop_assert_eq!(
            rules.fingerprint(Some(&JSON), &plain).fingerprint,
            rules.fingerprint(Some(&JSON), spelled.as_bytes()).fingerprint
        );
    }

    #[test]
    fn payloads_an_upstream_tells_apart_give_different_fingerprints(a in exact_value(), b in exact_value()) {
        let rules = FingerprintRules::default();
        let fa = rules.fingerprint(Some(&JSON), &serde_json::to_vec(&a).unwrap()).fingerprint;
        let fb = rules.fingerprint(Some(&JSON), &serde_json::to_vec(&b).unwrap()).fingerprint;
        prop_assert_eq!(a == b, fa == fb);
    }

    #[test]
    fn any_bytes_under_any_content_type_are_fingerprinted_without_panicking(
        body in prop::collection::vec(any::<u8>(), 0..512),
        json in any::<bool>(),
    ) {
        let rules = FingerprintRules {
            ignored: vec!["/a".parse().unwrap()],
            key_field: Some("/k".parse().unwrap()),
            ..Default::default()
        };
        let json_type = JSON;
        let _ = rules.fingerprint(json.then_some(&json_type), &body);
    }
}

const JSON: HeaderValue = HeaderValue::from_static("application/json");

fn print(rules: &FingerprintRules, body: &str) -> Fingerprint {
    rules.fingerprint(Some(&JSON), body.as_bytes()).fingerprint
}

#[test]
fn spelling_does_not_change_a_json_fingerprint() {
    let rules = FingerprintRules::default();
    assert_eq!(
        print(&rules, r#"{"to":"a@b.c","n":1.0}"#),
        print(&rules, "{ \"n\" : 10e-1, \"to\" : \"a\\u0040b.c\" }")
    );
}

#[test]
fn number_kinds_and_media_types_change_a_json_fingerprint_unless_merged() {
    let rules = FingerprintRules::default();
    assert_ne!(print(&rules, r#"{"n":1}"#), print(&rules, r#"{"n":1.0}"#));
    let merged = FingerprintRules {
        numbers: NumberKinds::Merged,
        ..Default::default()
    };
    assert_eq!(print(&merged, r#"{"n":1}"#), print(&merged, r#"{"n":1.0}"#));
    assert_ne!(print(&merged, r#"{"n":1}"#), print(&rules, r#"{"n":1}"#));
    let patch = HeaderValue::from_static("application/merge-patch+json");
    let charset = HeaderValue::from_static("Application/JSON; charset=utf-8");
    let with = |content_type: &HeaderValue| rules.fingerprint(Some(content_type), b"{}");
    assert_ne!(with(&patch).fingerprint, print(&rules, "{}"));
    assert_eq!(with(&charset).fingerprint, print(&rules, "{}"));
}

#[test]
fn a_body_without_canonical_form_is_unkeyable_only_when_fields_are_left_out() {
    let plain = FingerprintRules::default();
    let ignoring = FingerprintRules {
        ignored: vec!["/id".parse().unwrap()],
        ..Default::default()
    };
    let twice = br#"{"a":1,"a":2}"#;
    assert!(plain.fingerprint(Some(&JSON), twice).unkeyable.is_none());
    assert_eq!(
        ignoring.fingerprint(Some(&JSON), twice).unkeyable,
        Some(Unkeyable::Uncanonical(CanonicalError::DuplicateMember))
    );
    // JSON by its type that does not parse cannot have the fields left out either...
    assert!(ignoring.fingerprint(Some(&JSON), b"{").unkeyable.is_some());
    // ...while a body of another type is keyed by its bytes, as any other.
    let text = HeaderValue::from_static("text/plain");
    assert!(ignoring.fingerprint(Some(&text), b"{").unkeyable.is_none());
}

#[test]
fn ignored_fields_do_not_count() {
    let rules = FingerprintRules {
        ignored: vec!["/tool_call_id".parse().unwrap()],
        ..Default::default()
    };
    assert_eq!(
        print(&rules, r#"{"q":1,"tool_call_id":"call_1"}"#),
        print(&rules, r#"{"q":1,"tool_call_id":"call_2"}"#)
    );
    assert_ne!(print(&rules, r#"{"q":1}"#), print(&rules, r#"{"q":2}"#));
}

#[test]
fn unsafe_documents_fall_back_to_raw_bytes() {
    let rules = FingerprintRules::default();
    for body in [r#"{"a":1,"a":2}"#, r#""\ud800""#, "not json", "1e999"] {
        assert_eq!(print(&rules, body).kind(), FingerprintKind::Raw, "{body}");
    }
    // Duplicates resolved differently by different parsers must stay apart.
    assert_ne!(
        print(&rules, r#"{"a":1,"a":2}"#),
        print(&rules, r#"{"a":2,"a":1}"#)
    );
}

#[test]
fn non_json_content_types_are_raw_and_kept_apart() {
    let rules = FingerprintRules::default();
    let text = HeaderValue::from_static("text/plain");
    let a = rules.fingerprint(Some(&text), b"{}").fingerprint;
    let b = rules.fingerprint(Some(&JSON), b"{}").fingerprint;
    let c = rules.fingerprint(None, b"{}").fingerprint;
    assert_eq!(a.kind(), FingerprintKind::Raw);
    assert_ne!(a, b);
    assert_ne!(a, c);
}

#[test]
fn json_media_types_are_recognised() {
    for ok in [
        "application/json",
        "Application/JSON; charset=utf-8",
        "application/problem+json",
    ] {
        assert!(is_json(&HeaderValue::from_str(ok).unwrap()), "{ok}");
    }
    for no in ["text/plain", "application/jsonx", "json", "+json"] {
        assert!(!is_json(&HeaderValue::from_str(no).unwrap()), "{no}");
    }
}

#[test]
fn the_normalizer_rewrites_before_hashing() {
    let rules = FingerprintRules {
        normalizer: Some(Arc::new(|v: &mut serde_json::Value| {
            if let Some(to) = v
                .get_mut("to")
                .and_then(|t| t.as_str().map(str::to_lowercase))
            {
                v["to"] = to.into();
            }
        })),
        ..Default::default()
    };
    assert_eq!(
        print(&rules, r#"{"to":"A@B.C"}"#),
        print(&rules, r#"{"to":"a@b.c"}"#)
    );
    // An integer no 64-bit type holds cannot cross into serde_json: keyed without the hook.
    let big = print(&rules, r#"{"n":123456789012345678901234567890}"#);
    assert_eq!(big.kind(), FingerprintKind::Canonical);
    assert_eq!(
        big,
        print(&rules, r#"{ "n": 123456789012345678901234567890 }"#)
    );
}

#[test]
fn the_key_field_is_read_and_left_out() {
    let rules = FingerprintRules {
        key_field: Some("/request_id".parse().unwrap()),
        ..Default::default()
    };
    let a = rules.fingerprint(Some(&JSON), br#"{"request_id":"r-1","x":1}"#);
    let b = rules.fingerprint(Some(&JSON), br#"{"x":1}"#);
    assert_eq!(a.key_field.unwrap().unwrap().as_str(), "r-1");
    assert!(b.key_field.is_none());
    assert_eq!(a.fingerprint, b.fingerprint);
    let bad = rules.fingerprint(Some(&JSON), br#"{"request_id":{"x":1}}"#);
    assert!(bad.key_field.unwrap().is_err());
}

#[test]
fn an_argument_left_out_of_one_tools_calls_stays_in_every_other_tools() {
    let pointer = |text: &str| -> JsonPointer { text.parse().unwrap() };
    let rules = FingerprintRules {
        ignored_in_tool: vec![(
            pointer("/params/name"),
            "send_email".to_owned(),
            pointer("/params/arguments/request_id"),
        )],
        ..Default::default()
    };
    let call = |tool: &str, id: u32| {
        let body = format!(
            r#"{{"method":"tools/call","params":{{"name":"{tool}","arguments":{{"to":"a","request_id":{id}}}}}}}"#
        );
        rules.fingerprint(Some(&JSON), body.as_bytes()).fingerprint
    };
    assert_eq!(call("send_email", 1), call("send_email", 2));
    assert_ne!(call("charge_card", 1), call("charge_card", 2));
    assert_ne!(call("send_email", 1), call("charge_card", 1));
}

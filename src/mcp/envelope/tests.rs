use super::*;

fn read_str(body: &str) -> Envelope {
    read(body.as_bytes())
}

#[test]
fn a_tool_call_yields_its_id_and_tool_name() {
    let body = r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"send_email","arguments":{}}}"#;
    let Envelope::ToolCall(call) = read_str(body) else {
        panic!("not a tool call")
    };
    assert_eq!(call.id, Value::from("a-1"));
    assert_eq!(call.name, "send_email");
}

#[test]
fn other_methods_notifications_and_non_json_pass_through() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        "1",
    ] {
        assert!(matches!(read_str(body), Envelope::Other { .. }), "{body}");
    }
}

#[test]
fn other_requests_carry_their_id_and_notifications_none() {
    let Envelope::Other { id } = read_str(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#) else {
        panic!("not passed through")
    };
    assert_eq!(id, Some(Value::from("p")));
    let body = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert!(matches!(read_str(body), Envelope::Other { id: None }));
}

#[test]
fn a_cancellation_in_a_batch_or_with_an_id_never_slips_past() {
    let batch =
        r#"[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]"#;
    assert!(matches!(
        read_str(batch),
        Envelope::Refused(EnvelopeRefusal::Batch)
    ));
    let with_id =
        r#"{"jsonrpc":"2.0","id":5,"method":"notifications/cancelled","params":{"requestId":1}}"#;
    assert!(matches!(read_str(with_id), Envelope::Cancellation { .. }));
}

#[test]
fn a_body_the_layer_cannot_read_is_refused_whatever_it_names() {
    for (body, why) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"n":NaN}}}"#,
            "not JSON",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"x","arguments":{"s":"\ud800"}}}"#,
            "lone surrogate",
        ),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#, "trailing"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"pi"#, "not JSON"),
        ("", "not JSON"),
        ("[1e999]", "out of the range"),
        (&format!("[{}]", "9".repeat(400)), "out of the range"),
    ] {
        match read_str(body) {
            Envelope::Refused(EnvelopeRefusal::Unparsable { why: found }) => {
                assert!(found.contains(why), "{body}: {found}");
            }
            other => panic!("{body}: {other:?}"),
        }
    }
    let invalid = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"s\":\"\xff\"}";
    assert!(matches!(
        read(invalid),
        Envelope::Refused(EnvelopeRefusal::Unparsable { .. })
    ));
}

#[test]
fn a_member_named_twice_is_refused_as_ambiguous_answering_the_id_read() {
    let twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list"}"#;
    assert!(matches!(
        read_str(twice),
        Envelope::Refused(EnvelopeRefusal::Ambiguous { id: Some(id) }) if id == 1
    ));
    let deep = r#"{"jsonrpc":"2.0","method":"ping","params":{"a":{"b":1,"b":2}}}"#;
    assert!(matches!(
        read_str(deep),
        Envelope::Refused(EnvelopeRefusal::Ambiguous { id: None })
    ));
}

#[test]
fn a_method_spelt_with_escapes_is_read_as_written() {
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"send\u005femail"}}"#;
    let Envelope::ToolCall(call) = read_str(body) else {
        panic!("not a tool call")
    };
    assert_eq!(call.name, "send_email");
}

#[test]
fn a_cancellation_names_the_request_it_cancels() {
    let body = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"timeout"}}"#;
    let Envelope::Cancellation { request_id } = read_str(body) else {
        panic!("not a cancellation")
    };
    assert_eq!(request_id, Some(Value::from(7)));
    let body = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#;
    assert!(matches!(
        read_str(body),
        Envelope::Cancellation { request_id: None }
    ));
}

#[test]
fn malformed_tool_calls_are_refused() {
    let cases = [
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]"#,
            EnvelopeRefusal::Batch,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            EnvelopeRefusal::Notification,
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"n":1},"method":"tools/call","params":{"name":"x"}}"#,
            EnvelopeRefusal::BadId,
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#,
            EnvelopeRefusal::NoToolName { id: 3.into() },
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":7}}"#,
            EnvelopeRefusal::NoToolName { id: 3.into() },
        ),
    ];
    for (body, refusal) in cases {
        match read_str(body) {
            Envelope::Refused(found) => assert_eq!(found, refusal, "{body}"),
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn discovery_requests_and_task_queries_are_recognised() {
    let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#;
    assert!(matches!(
        read_str(body),
        Envelope::Discovery { id, what: Discovery::ToolsList } if id == 9
    ));
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
    assert!(matches!(
        read_str(body),
        Envelope::Discovery {
            what: Discovery::Initialize,
            ..
        }
    ));
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"t"}}"#;
    let Envelope::TaskQuery(query) = read_str(body) else {
        panic!("not a task query")
    };
    assert!(query.asks == TaskAsk::Result && query.task_id == "t" && query.id == 2);
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"taskId":"t"}}"#;
    let Envelope::TaskQuery(query) = read_str(body) else {
        panic!("not a task request")
    };
    assert_eq!(query.asks, TaskAsk::Cancel);
}

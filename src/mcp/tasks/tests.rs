use super::*;

#[test]
fn timestamps_are_rfc_3339_in_utc() {
    assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(timestamp(1_764_000_000_123), "2025-11-24T16:00:00.123Z");
}

#[test]
fn a_created_task_carries_its_intent_as_its_id() {
    let key: IntentKey = "ab".repeat(32).parse().unwrap();
    let view = TaskView {
        key,
        status: TaskStatus::Working,
        created_at_ms: 0,
        updated_at_ms: 0,
        ttl: Duration::from_secs(60),
    };
    let created = view.created(&json!(3));
    assert_eq!(created["id"], 3);
    let task = &created["result"]["task"];
    assert_eq!(task["taskId"], "ab".repeat(32));
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 60_000);
    assert!(task["statusMessage"]
        .as_str()
        .unwrap()
        .starts_with("The action is running"));
}

#[test]
fn protected_tools_are_offered_as_tasks_unless_they_say_otherwise() {
    let mut result = json!({"tools": [
        {"name": "send_email"},
        {"name": "search"},
        {"name": "pay", "execution": {"taskSupport": "forbidden"}},
    ]});
    offer_to_tools(result.as_object_mut().unwrap(), |name| name != "search");
    assert_eq!(result["tools"][0]["execution"]["taskSupport"], "optional");
    assert!(result["tools"][1].get("execution").is_none());
    assert_eq!(result["tools"][2]["execution"]["taskSupport"], "forbidden");
}

#[test]
fn the_capability_is_added_beside_the_servers_own() {
    let mut result = json!({"capabilities": {"tools": {}}, "protocolVersion": "2025-11-25"});
    declare_capability(result.as_object_mut().unwrap());
    assert_eq!(result["capabilities"]["tools"], json!({}));
    assert_eq!(
        result["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({})
    );
}

#[test]
fn a_result_is_tied_to_its_task() {
    let mut message = json!({"id": 1, "result": {"content": []}});
    relate(message.as_object_mut().unwrap(), "t1");
    assert_eq!(message["result"]["_meta"][RELATED_TASK]["taskId"], "t1");
}

//! Writing what the layer says as an HTTP response: JSON, and for errors an
//! `application/problem+json` document (RFC 9457) with the layer's members as extensions.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::body::ResponseBody;
use crate::headers::RequestId;
use crate::key::IntentKey;
use crate::wording::Words;

/// The response for `told`, with this status; `location` names where to ask later.
pub(crate) fn write(status: StatusCode, told: &Words, location: Option<&str>) -> Response<Bytes> {
    let is_problem = status.is_client_error() || status.is_server_error();
    // Written by hand rather than through a `Map`, which would sort the members: the outcome
    // and the detail sentence should come first for a reader.
    let mut text = String::with_capacity(512);
    let mut put = |name: &str, value: &Value| {
        text.push(if text.is_empty() { '{' } else { ',' });
        text.push_str(&Value::from(name).to_string());
        text.push(':');
        text.push_str(&value.to_string());
    };
    if is_problem {
        put(
            "type",
            &format!("urn:tower-idempotency:{}", told.slug).into(),
        );
        put("title", &told.title.into());
        put("status", &status.as_u16().into());
    }
    put("outcome", &told.outcome.into());
    put("retryable", &told.retryable.into());
    put("detail", &told.detail.as_str().into());
    for (name, value) in &told.members {
        put(name, value);
    }
    text.push('}');
    let mut response = Response::new(Bytes::from(text));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if is_problem {
            "application/problem+json"
        } else {
            "application/json"
        }),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(seconds) = told.retry_after_s {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if let Some(location) = location.and_then(|l| HeaderValue::try_from(l).ok()) {
        headers.insert(header::LOCATION, location);
    }
    response
}

/// A response the layer wrote, as the service's response.
pub(crate) fn written<B>(status: StatusCode, told: &Words) -> Response<ResponseBody<B>> {
    written_at(status, told, None)
}

/// A response the layer wrote, naming where to ask later, as the service's response.
pub(crate) fn written_at<B>(
    status: StatusCode,
    told: &Words,
    location: Option<&str>,
) -> Response<ResponseBody<B>> {
    let mut response = write(status, told, location);
    let document = LayerDocument(response.body().clone());
    response.extensions_mut().insert(document);
    response.map(ResponseBody::full)
}

/// The JSON document of a response the layer wrote, kept beside its body until the answer
/// leaves the layer, which adds the request's id to it.
#[derive(Clone)]
struct LayerDocument(Bytes);

/// `response` as it leaves the layer: a document the layer wrote for this request says its
/// `request_id`, where the request had one. Any other response is left as it is.
pub(crate) fn with_request_id<B>(
    mut response: Response<ResponseBody<B>>,
    id: Option<&RequestId>,
) -> Response<ResponseBody<B>> {
    let Some(LayerDocument(document)) = response.extensions_mut().remove::<LayerDocument>() else {
        return response;
    };
    if let Some(id) = id {
        // The layer writes one object, closed by its last byte.
        if let Some(open) = document.strip_suffix(b"}") {
            let mut out = Vec::with_capacity(document.len() + id.as_str().len() + 24);
            out.extend_from_slice(open);
            out.extend_from_slice(b",\"request_id\":");
            out.extend_from_slice(Value::from(id.as_str()).to_string().as_bytes());
            out.push(b'}');
            *response.body_mut() = ResponseBody::full(Bytes::from(out));
        }
    }
    response
}

/// A response of the inner service, with no mark that this layer wrote it: only the layer's
/// own documents are given the request's id.
pub(crate) fn unmarked<B>(mut response: Response<B>) -> Response<B> {
    response.extensions_mut().remove::<LayerDocument>();
    response
}

/// Adds the `_idempotency` member to a replayed JSON object body, for models that never see
/// headers. The stored bytes are kept as they are around the new member; bodies that are not a
/// JSON object give `None`.
pub(crate) fn annotate(body: &Bytes, key: &IntentKey) -> Option<Bytes> {
    let object: Map<String, Value> = serde_json::from_slice(body).ok()?;
    let open = body.iter().position(|&b| b == b'{')?;
    let member = json!({
        "replayed": true,
        "intent": key.to_hex(),
        "detail": "This is the stored result of an earlier identical call; the action was not \
                   run again.",
    });
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(b"\"_idempotency\":");
    out.extend_from_slice(member.to_string().as_bytes());
    if !object.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(&body[open + 1..]);
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Refusal;
    use crate::settings::Settings;

    fn body(response: Response<Bytes>) -> (StatusCode, Value, http::HeaderMap) {
        let status = response.status();
        let headers = response.headers().clone();
        (
            status,
            serde_json::from_slice(response.body()).unwrap(),
            headers,
        )
    }

    #[test]
    fn errors_are_problem_documents_with_the_contract_members() {
        let key = IntentKey::from_bytes([7; 32]);
        let told = crate::wording::refusal(&Refusal::TooBusy, &Settings::default(), Some(&key));
        let (status, value, headers) = body(write(StatusCode::SERVICE_UNAVAILABLE, &told, None));
        assert_eq!(status, 503);
        assert_eq!(headers[header::CONTENT_TYPE], "application/problem+json");
        assert_eq!(headers[header::RETRY_AFTER], "1");
        assert_eq!(value["status"], 503);
        assert_eq!(value["outcome"], "not_executed");
        assert_eq!(value["retryable"], true);
        assert!(value["type"].as_str().unwrap().starts_with("urn:"));
        assert!(value["detail"]
            .as_str()
            .unwrap()
            .starts_with("The action was not executed"));
    }

    #[test]
    fn in_progress_says_first_that_the_action_runs() {
        let key = IntentKey::from_bytes([1; 32]);
        let keeps = "the `x-session-id` header";
        let asker = crate::wording::Asker::Duplicate;
        let told = crate::wording::in_progress(&key, "/_idempotency/x", 7, keeps, asker);
        let response = write(StatusCode::ACCEPTED, &told, Some("/_idempotency/x"));
        let (status, value, headers) = body(response);
        assert_eq!(status, 202);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(headers[header::LOCATION], "/_idempotency/x");
        assert_eq!(value["retry_after_s"], 4);
        assert_eq!(value["started_s_ago"], 7);
        assert!(value.get("type").is_none());
        assert!(value["detail"]
            .as_str()
            .unwrap()
            .starts_with("This action is already running"));
    }

    #[tokio::test]
    async fn the_layers_own_documents_say_the_request_id_and_no_other_body_is_touched() {
        use http_body_util::BodyExt;
        type Body = ResponseBody<http_body_util::Full<Bytes>>;
        let read = |response: Response<Body>| async move {
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        };
        let mut headers = http::HeaderMap::new();
        headers.insert("x-request-id", HeaderValue::from_static(r#"req-"7"#));
        let name = http::HeaderName::from_static("x-request-id");
        let id = RequestId::of(&headers, &name);
        let told = crate::wording::refusal(&Refusal::TooBusy, &Settings::default(), None);

        let refused: Response<Body> = written(StatusCode::SERVICE_UNAVAILABLE, &told);
        let value = read(with_request_id(refused, id.as_ref())).await;
        assert_eq!(value["request_id"], r#"req-"7"#);
        assert_eq!(value["outcome"], "not_executed");

        let without: Response<Body> = written(StatusCode::SERVICE_UNAVAILABLE, &told);
        let value = read(with_request_id(without, None)).await;
        assert!(value.get("request_id").is_none(), "{value}");

        // A body the layer did not write (the tool's, a replay's) is left as it came.
        let tools = Response::new(Body::full(Bytes::from_static(br#"{"sent":true}"#)));
        let value = read(with_request_id(tools, id.as_ref())).await;
        assert_eq!(value, serde_json::json!({"sent": true}));
        let marked: Response<Body> = written(StatusCode::SERVICE_UNAVAILABLE, &told);
        let value = read(with_request_id(unmarked(marked), id.as_ref())).await;
        assert!(value.get("request_id").is_none(), "{value}");
    }

    #[test]
    fn annotation_only_touches_json_objects() {
        let key = IntentKey::from_bytes([2; 32]);
        let out = annotate(&Bytes::from_static(br#" {"b":2, "a":1}"#), &key).unwrap();
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert!(out.ends_with(br#","b":2, "a":1}"#));
        let empty = annotate(&Bytes::from_static(b"{}"), &key).unwrap();
        assert!(serde_json::from_slice::<Value>(&empty).is_ok());
        assert_eq!(value["a"], 1);
        assert_eq!(value["_idempotency"]["replayed"], true);
        assert!(annotate(&Bytes::from_static(b"[1]"), &key).is_none());
        assert!(annotate(&Bytes::from_static(b"text"), &key).is_none());
    }
}

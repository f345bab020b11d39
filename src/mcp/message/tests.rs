use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use http_body::Frame;
use http_body_util::{Full, StreamBody};
use serde_json::json;

fn headers(content_type: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
    headers
}

fn accept(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT, value.parse().unwrap());
    headers
}

#[tokio::test]
async fn the_answer_is_found_after_priming_and_progress_events() {
    let stream = "data: \nid: 0\nretry: 3000\n\n\
        data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\nid: 1/0\n\n";
    let body = Full::new(Bytes::from(stream));
    let found = read_answer(&headers("text/event-stream"), body, &json!(7), 1 << 20)
        .await
        .unwrap();
    assert_eq!(
        found,
        json!({"jsonrpc":"2.0","id":7,"result":{"content":[]}})
    );
}

#[tokio::test]
async fn a_stream_that_ends_after_a_priming_event_names_where_to_resume() {
    let stream = "id: s1-0\nretry: 250\ndata: \n\n";
    let body = Full::new(Bytes::from(stream));
    let mut primed = StreamPosition::default();
    let sse = headers("text/event-stream");
    let found = read_answer_from(&sse, body, &json!(7), 1 << 20, &mut primed, None).await;
    assert_eq!(found, Err(Unreadable::Ended));
    let expected = StreamPosition {
        last_event_id: Some("s1-0".to_owned()),
        retry: Some(std::time::Duration::from_millis(250)),
    };
    assert_eq!(primed, expected);
    // A resumed stream that gives no new id keeps where the call stood.
    let body = Full::new(Bytes::from(": just a comment\n\n"));
    let found = read_answer_from(&sse, body, &json!(7), 1 << 20, &mut primed, None).await;
    assert_eq!(found, Err(Unreadable::Ended));
    assert_eq!(primed, expected);
}

#[tokio::test]
async fn an_answer_before_a_line_the_reader_rejects_is_read_however_the_stream_is_split() {
    let stream: &[u8] = b"id: 0\nretry: 3000\ndata: \n\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n\
        i\x81: 1\n\n";
    let sse = headers("text/event-stream");
    for chunk in [stream.len(), 1] {
        let frames = stream
            .chunks(chunk)
            .map(|c| Ok::<_, Infallible>(Frame::data(Bytes::copy_from_slice(c))));
        let body = StreamBody::new(futures_util::stream::iter(frames));
        let mut primed = StreamPosition::default();
        let found = read_answer_from(&sse, body, &json!(7), 1 << 20, &mut primed, None).await;
        assert_eq!(
            found,
            Ok(json!({"jsonrpc":"2.0","id":7,"result":{}})),
            "{chunk}"
        );
        assert_eq!(primed.last_event_id.as_deref(), Some("0"), "{chunk}");
    }
    // Where the answer is not before it, the stream cannot be read, and where it stood counts.
    let mut primed = StreamPosition::default();
    let rejected = Full::new(Bytes::from_static(b"id: 3\ndata: \n\ni\x81: 1\n\n"));
    let found = read_answer_from(&sse, rejected, &json!(7), 1 << 20, &mut primed, None).await;
    assert_eq!(found, Err(Unreadable::Unparsable));
    assert_eq!(primed.last_event_id.as_deref(), Some("3"));
}

#[tokio::test]
async fn an_answer_to_another_id_is_not_taken() {
    let body = Full::new(Bytes::from(r#"{"jsonrpc":"2.0","id":8,"result":{}}"#));
    let found = read_answer(&headers("application/json"), body, &json!(7), 1 << 20).await;
    assert!(found.is_err());
    let stream = "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n\n";
    let body = Full::new(Bytes::from(stream));
    let found = read_answer(&headers("text/event-stream"), body, &json!(7), 1 << 20).await;
    assert!(found.is_err());
}

/// An event stream of `chunk`, repeated without end, counting the bytes read of it.
fn endless(
    chunk: &'static str,
    read: Arc<AtomicUsize>,
) -> impl Body<Data = Bytes, Error = Infallible> + Send {
    let frames = futures_util::stream::repeat_with(move || {
        read.fetch_add(chunk.len(), Ordering::Relaxed);
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(chunk.as_bytes())))
    });
    StreamBody::new(frames)
}

#[tokio::test]
async fn a_tool_that_streams_notifications_past_the_bound_is_read_to_its_answer() {
    // Four times the bound and more of notifications, each within it, then the answer: the
    // notifications are dropped as they come, so the stream is read on to the answer.
    let note = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
    let answer = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n";
    let stream = format!("{}{answer}", note.repeat(64));
    let body = Full::new(Bytes::from(stream));
    let found = read_answer(
        &headers("text/event-stream"),
        body,
        &json!(7),
        4 * note.len(),
    )
    .await
    .unwrap();
    assert_eq!(found["result"], json!({"content": []}));
}

#[tokio::test]
async fn one_event_that_never_ends_is_read_no_further_than_the_bound() {
    let read = Arc::new(AtomicUsize::new(0));
    let chunk = "data: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let body = endless(chunk, Arc::clone(&read));
    let bound = 64 * chunk.len();
    let found = read_answer(&headers("text/event-stream"), body, &json!(7), bound).await;
    assert_eq!(found, Err(Unreadable::TooLarge));
    let read = read.load(Ordering::Relaxed);
    assert!(
        read <= bound + chunk.len(),
        "{read} bytes read, bound {bound}"
    );
}

#[test]
fn an_event_ends_at_a_blank_line_whichever_line_ends_it_uses() {
    let mut unfinished = PartialEvent::default();
    assert_eq!(unfinished.take(b"data: a\r\n\r\ndata: bc"), 8);
    assert_eq!(unfinished.take(b"\n"), 9);
    assert_eq!(unfinished.take(b"\ndata: d\n"), 8);
    assert_eq!(unfinished.take(b"\n"), 0);
}

#[test]
fn json_is_written_unless_only_an_event_stream_is_accepted() {
    assert_eq!(Form::of(&HeaderMap::new()), Form::Json);
    assert_eq!(
        Form::of(&accept("application/json, text/event-stream")),
        Form::Json
    );
    assert_eq!(Form::of(&accept("text/event-stream")), Form::EventStream);
    assert_eq!(
        Form::of(&accept("text/event-stream;q=1")),
        Form::EventStream
    );
}

#[test]
fn an_event_stream_answer_is_one_message_event() {
    let message = json!({"jsonrpc":"2.0","id":1,"result":{}});
    let response = write(&message, Form::EventStream, HeaderMap::new());
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let text = std::str::from_utf8(response.body()).unwrap();
    assert!(text.starts_with("event: message\ndata: {"), "{text}");
    assert!(text.ends_with("\n\n"), "{text}");
}

#[test]
fn the_bytes_of_an_unfinished_event_are_counted_alike_however_they_are_split() {
    // A lone CR ends no line here: LF CR CR LF holds no blank line, whole or a byte at a time.
    for stream in [
        &b"jse\r\ndata: x\n\r\r\n"[..],
        b"data: a\n\r\ndata: b\r\n\r\n",
        b"\r\n\n",
    ] {
        let whole = PartialEvent::default().take(stream);
        let mut bytewise = PartialEvent::default();
        let split = stream
            .iter()
            .fold(0, |_, byte| bytewise.take(std::slice::from_ref(byte)));
        assert_eq!(split, whole, "{:?}", String::from_utf8_lossy(stream));
    }
}

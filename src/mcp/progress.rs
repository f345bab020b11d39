//! A progress notification relayed to a caller, under the caller's own progress token: the
//! server wrote the token of the request that reached it, and a caller that took over from
//! that one (a retry, a fresh id and a fresh token) knows only its own. A caller that asked
//! for no progress is given none.

use bytes::Bytes;
use memchr::memmem;
use serde_json::Value;
use sse_stream::Sse;

const PROGRESS: &str = "notifications/progress";

/// `event` as the caller with `token` takes it; `None` where it is progress it did not ask for.
pub(crate) fn fitted(event: Bytes, token: Option<&Value>) -> Option<Bytes> {
    // Only progress is read again; every other event goes as it is.
    if memmem::find(&event, PROGRESS.as_bytes()).is_none() {
        return Some(event);
    }
    // Most progress goes to the caller whose token the server wrote: told from the token's
    // text alone, without reading the message into a tree.
    if let (Some(token), Some(written)) = (token, written_token(&event)) {
        if serde_json::to_string(token).is_ok_and(|token| token == written) {
            return Some(event);
        }
    }
    let Some(mut message) = message_of(&event) else {
        return Some(event);
    };
    if message.get("method").and_then(Value::as_str) != Some(PROGRESS) {
        return Some(event);
    }
    let token = token?;
    let Some(written) = message.pointer_mut("/params/progressToken") else {
        return Some(event);
    };
    if written == token {
        return Some(event);
    }
    *written = token.clone();
    Some(Bytes::from(
        Sse::default().event("message").data(message.to_string()),
    ))
}

/// The progress token of a progress event whose data is one line, as written; `None` for
/// anything else, which is then read whole.
fn written_token(event: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Progress<'a> {
        method: &'a str,
        #[serde(borrow)]
        params: Params<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(rename = "progressToken", borrow)]
        token: &'a serde_json::value::RawValue,
    }
    let text = std::str::from_utf8(event).ok()?;
    let mut data = text.lines().filter_map(|line| line.strip_prefix("data:"));
    let line = data.next()?;
    if data.next().is_some() {
        return None;
    }
    let progress: Progress<'_> = serde_json::from_str(line.trim_start()).ok()?;
    (progress.method == PROGRESS).then(|| progress.params.token.get().to_owned())
}

/// The JSON-RPC message of one event as the relay writes it (`data:` lines).
fn message_of(event: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(event).ok()?;
    let data: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| data.strip_prefix(' ').unwrap_or(data))
        .collect();
    serde_json::from_str(&data.join("\n")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(message: &Value) -> Bytes {
        Bytes::from(Sse::default().event("message").data(message.to_string()))
    }

    #[test]
    fn progress_carries_the_callers_token_and_nothing_else_changes() {
        let progress = json!({"jsonrpc": "2.0", "method": PROGRESS,
            "params": {"progressToken": "first", "progress": 3}});
        let fitted = fitted(event(&progress), Some(&json!(7))).unwrap();
        let message = message_of(&fitted).unwrap();
        assert_eq!(
            message["params"],
            json!({"progressToken": 7, "progress": 3})
        );
        // The caller's own token: the event as the server wrote it.
        let same = event(&progress);
        assert_eq!(fitted_of(&same, "first"), same);
        // No progress asked for: none given.
        assert_eq!(super::fitted(event(&progress), None), None);
        // Anything else goes as it is.
        let log = event(&json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"data": "notifications/progress"}}));
        assert_eq!(super::fitted(log.clone(), None), Some(log));
    }

    fn fitted_of(event: &Bytes, token: &str) -> Bytes {
        fitted(event.clone(), Some(&json!(token))).unwrap()
    }
}

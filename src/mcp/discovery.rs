//! Discovery answers on their way back: `tools/list` teaches the layer which tools the server
//! declares read-only, and with tasks served, `initialize` and a handshake-era `tools/list`
//! (2025-11-25 tasks) or `server/discover` (the tasks extension) are completed with what the
//! layer adds.

use bytes::Bytes;
use http::Response;
use http_body::Body;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use super::endpoint::Endpoint;
use super::envelope::Discovery;
use super::era::Era;
use super::listing::Revision;
use super::message::{self, Form};
use super::tasks;
use crate::body::BoxError;
use crate::body::GatheredBody;
use crate::body::ResponseBody;

/// Passes an `initialize` or `tools/list` answer on, learning the tools' annotations from
/// it on the way (a listing asked for in `revision` of its server's listing); with tasks served, it is completed with what the layer adds (the tasks
/// capability, the tools' task support) and written again in the form it came in. One
/// over the response limit is passed on unread.
pub(crate) async fn read_discovery<St, B>(
    endpoint: &Endpoint<St>,
    response: Response<B>,
    id: &Value,
    (what, era): (Discovery, Era),
    revision: Revision,
) -> Response<ResponseBody<B>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let limit = endpoint.engine.settings.response_limit;
    let (parts, body) = response.into_parts();
    let learns = what == Discovery::ToolsList;
    if !parts.status.is_success() || (!learns && !endpoint.tasks) {
        return Response::from_parts(parts, ResponseBody::inner(body));
    }
    let mut body = Box::pin(body);
    let mut head = GatheredBody::default();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map(|frame| frame.into_data()) else {
            return Response::from_parts(parts, ResponseBody::chained(head.into_bytes(), body));
        };
        if let Ok(data) = data {
            head.push(data);
        }
        if head.len() > limit {
            return Response::from_parts(parts, ResponseBody::chained(head.into_bytes(), body));
        }
    }
    let head = head.into_bytes();
    let answer = message::read_answer(&parts.headers, Full::new(head.clone()), id, limit).await;
    let Ok(Value::Object(mut answer)) = answer else {
        return Response::from_parts(parts, ResponseBody::full(head));
    };
    let Some(Value::Object(result)) = answer.get_mut("result") else {
        return Response::from_parts(parts, ResponseBody::full(head));
    };
    if learns {
        endpoint.policy.learn(revision, result);
    }
    // The 2025-11-25 tasks are offered per tool; the tasks extension has no such member.
    if !endpoint.tasks || (learns && era == Era::Stateless) {
        return Response::from_parts(parts, ResponseBody::full(head));
    }
    match what {
        Discovery::ToolsList => {
            let server = revision.server();
            tasks::offer_to_tools(result, |name| !endpoint.policy.passes_through(server, name))
        }
        Discovery::Initialize => tasks::declare_capability(result),
        Discovery::ServerDiscover => tasks::declare_extension(result),
    }
    let came_as = if message::is_event_stream(&parts.headers) {
        Form::EventStream
    } else {
        Form::Json
    };
    let status = parts.status;
    let mut rewritten = message::write(&Value::Object(answer), came_as, parts.headers);
    *rewritten.status_mut() = status;
    rewritten.map(ResponseBody::full)
}

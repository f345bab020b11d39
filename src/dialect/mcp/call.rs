//! A protected `tools/call`: keyed by its scope, tool and arguments, run once by the engine,
//! answered in JSON-RPC terms.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use bytes::Bytes;
use http::request::Parts;
use http::{header, Request, Response};
use tracing::Instrument;

use super::cancellation;
use super::endpoint::{Answered, Endpoint};
use super::envelope::ToolCall;
use super::era::Era;
use super::live::{self, Live};
use super::message::{self, Form};
use super::plain_call;
use super::relay::{self, Outlet};
use super::render::Rendering;
use super::resume::{self, Resumption};
use crate::body::ResponseBody;
use crate::body::{Bufferable, Keepable};
use crate::dialect::{decided, finish, Tool};
use crate::engine::relay::{Attachment, Relay, Relaying};
use crate::engine::{self, Begun, Decided, Scoped};
use crate::store::{Protocol, Store};
use crate::telemetry::{self, Op};

/// Writes the operation label of a tool call: `tools/call NAME` for names that look like tool
/// names, so that a client cannot grow the label set at will.
fn write_tool_label(name: &str, label: &mut String) {
    let plain = name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b));
    label.push_str("tools/call ");
    label.push_str(if plain { name } else { "(other)" });
}

/// The operation of a call: the user's route label where one is set, else the tool's.
pub(super) fn op_of<St: Store>(endpoint: &Endpoint<St>, parts: &Parts, call: &ToolCall) -> Op {
    let ops = &endpoint.engine.runtime.ops;
    match &endpoint.engine.settings.route_label {
        Some(label) => ops.of(Some(label), parts),
        None => ops.named_with(|label| write_tool_label(&call.name, label)),
    }
}

/// A protected tool call, run once per intent; run as a task where one is asked for and
/// tasks are served. A caller that takes an event stream is handed what the server says
/// before the answer as it comes ([`live`]).
pub(crate) async fn call_tool<St: Store, S, B, ResBody>(
    endpoint: &Arc<Endpoint<St>>,
    mut inner: S,
    mut parts: Parts,
    mut bytes: Bytes,
    call: ToolCall,
    form: Form,
    era: Era,
) -> Answered<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let started = telemetry::Stopwatch::start();
    let settings = &endpoint.engine.settings;
    let mut timing = endpoint.policy.timing(&call.name);
    // The 2025-11-25 tasks, asked for per call; the stateless era ignores `params.task`.
    let as_task = call.as_task && endpoint.tasks && era == Era::Handshake;
    if as_task {
        // The server runs a plain call; the layer is the one that answers with a task.
        if let Some(plain) = plain_call::without_task(&bytes) {
            bytes = Bytes::from(plain);
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        timing.deadline = Some(Duration::ZERO);
    }
    let rendering = Rendering {
        endpoint,
        call: &call,
        era,
        form,
        as_task,
        // The tasks extension: past the deadline, a task where the client takes one.
        offers_task: endpoint.tasks && era == Era::Stateless && call.meta.tasks_extension,
        retention: timing.retention.unwrap_or(settings.paths.default_retention),
    };
    let scope = settings.scope.scope_in(&parts, era.narrowing());
    let op = match &scope {
        Ok(Some(_)) => op_of(endpoint, &parts, &call),
        _ => endpoint.engine.runtime.ops.unscoped(),
    };
    let span = telemetry::request_span(&op);
    let scoped = span.in_scope(|| engine::scoped(settings, scope, &op));
    let scope = match scoped {
        Scoped::Protect(scope) => scope,
        Scoped::PassThrough => {
            let answered = inner
                .call(Request::from_parts(parts, B::from(bytes)))
                .instrument(span)
                .await;
            telemetry::answered(&op, answered.as_ref().ok().map(Response::status), started);
            return Ok(answered?.map(ResponseBody::inner));
        }
        Scoped::Refuse(refusal) => {
            let refused = Ok(Decided::Refused(refusal));
            return finish(&rendering, &op, &span, started, refused);
        }
    };
    let limit = settings.response_limit;
    let id = call.id.clone();
    // Relayed unless the layer answers with a task at once: to this caller where it takes an
    // event stream, and to a later one that does.
    let listens = message::accepts(&parts.headers, "text/event-stream");
    let relayed = (!as_task).then(|| relayed(endpoint, &parts, &call, listens));
    let (relaying, outlet, attached) = match relayed {
        Some(Relayed {
            relaying,
            outlet,
            attached,
        }) => (Some(relaying), Some(outlet), attached),
        None => (None, None, None),
    };
    let names_extension = call.meta.tasks_extension;
    let work = move |mut parts: Parts, mut bytes: Bytes| async move {
        // Only the layer makes a task of a protected call.
        if names_extension {
            if let Some(plain) = plain_call::without_tasks_extension(&bytes) {
                bytes = Bytes::from(plain);
                parts.headers.remove(header::CONTENT_LENGTH);
            }
        }
        let resumption = (era == Era::Handshake).then(|| Resumption::of(&parts));
        let response = inner
            .call(Request::from_parts(parts, B::from(bytes)))
            .await?;
        let outlet = outlet.as_ref();
        Ok(resume::read_resuming(&mut inner, response, &id, limit, resumption, outlet).await)
    };
    let offers_task = rendering.offers_task;
    let retention = rendering.retention;
    let engine_call = engine::Call {
        protocol: Protocol::Mcp,
        timing,
        relaying,
    };
    let begun = span.in_scope(|| {
        endpoint
            .engine
            .begin(parts, bytes, &scope, &op, engine_call, work)
    });
    let begun = match (begun, attached) {
        (Begun::Running(running), Some((attached, slot))) => {
            let live = Live {
                endpoint: Arc::clone(endpoint),
                call,
                era,
                form,
                offers_task,
                retention,
                op,
                span,
                started,
            };
            return live::answer(live, slot, running, attached).await;
        }
        (begun, _) => begun,
    };
    let decided = decided(begun, &span).await;
    finish(&rendering, &op, &span, started, decided)
}

/// What relaying one call takes: the relay its execution writes to should it run it, where
/// the stream's messages go, and, for a caller that `listens`, where its attachment comes
/// back, with the call's slot for its cancellation.
struct Relayed {
    relaying: Relaying,
    outlet: Outlet,
    attached: Option<(oneshot::Receiver<Attachment>, u128)>,
}

fn relayed<St>(endpoint: &Endpoint<St>, parts: &Parts, call: &ToolCall, listens: bool) -> Relayed {
    let relay = Arc::new(Relay::default());
    let (attachment, attached) = match listens {
        true => {
            let (attachment, attached) = oneshot::channel();
            let slot = cancellation::slot(&parts.headers, &call.id);
            (Some(attachment), Some((attached, slot)))
        }
        false => (None, None),
    };
    let outlet = Outlet {
        relay: Arc::clone(&relay),
        relays: endpoint.relays.clone(),
        session: relay::session_of(&parts.headers),
    };
    Relayed {
        relaying: Relaying { relay, attachment },
        outlet,
        attached,
    }
}

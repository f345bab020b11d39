//! A protected `tools/call`: keyed by its scope, tool and arguments, run once by the engine,
//! answered in JSON-RPC terms.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{header, Request, Response};
use tokio::sync::oneshot;
use tracing::Instrument;

use super::cancellation;
use super::dialect::McpCall;
use super::endpoint::Endpoint;
use super::envelope::ToolCall;
use super::era::Era;
use super::list_changed::ListChanges;
use super::listing::Server;
use super::live::{self, Live};
use super::message::{self, Form};
use super::plain_call;
use super::relay::{self, Outlet};
use super::resume::{self, Resumption};
use super::tool::ServerAnswer;
use crate::body::{Bufferable, Keepable, ResponseBody};
use crate::dialect::{finish, Answer, Dialect, Payload, Telling, Tool};
use crate::engine::path::Running;
use crate::engine::relay::{Attachment, Relay, Relaying};
use crate::engine::{Call, Decision, Engine, Reading};
use crate::headers::RequestId;
use crate::scope::{Scope, ScopeFault};
use crate::store::{Protocol, Store};
use crate::telemetry::Op;

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
pub(crate) fn call_tool<St: Store, S, B, ResBody>(
    endpoint: &Arc<Endpoint<St>>,
    inner: S,
    mut parts: Parts,
    mut bytes: Bytes,
    (call, server): (ToolCall, Server),
    form: Form,
    era: Era,
) -> impl Future<Output = Answer<ResBody, S::Error>> + Send + 'static
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
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
    let mcp = McpCall {
        endpoint: Arc::clone(endpoint),
        // The tasks extension: past the deadline, a task where the client takes one.
        offers_task: endpoint.tasks && era == Era::Stateless && call.meta.tasks_extension,
        retention: timing.retention.unwrap_or(settings.paths.default_retention),
        call,
        server,
        era,
        form,
        as_task,
        timing,
        outlet: std::sync::Mutex::new(None),
        attached: None,
        request_id: RequestId::of(&parts.headers, &settings.request_id_header),
    };
    crate::dialect::protect(mcp, inner, parts, Payload::Read(bytes))
}

impl<St, S, B, ResBody> Dialect<S, B, ResBody> for McpCall<St>
where
    St: Store,
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    type Store = St;
    type Answer = ServerAnswer;

    fn engine(&self) -> &Arc<Engine<St>> {
        &self.endpoint.engine
    }

    fn scope(&self, parts: &Parts) -> Result<Option<Scope>, ScopeFault> {
        let settings = &self.endpoint.engine.settings;
        settings.scope.scope_in(parts, self.era.narrowing())
    }

    fn operation(&self, parts: &Parts) -> Op {
        op_of(&self.endpoint, parts, &self.call)
    }

    fn call(&mut self, parts: &Parts) -> Call {
        // Relayed unless the layer answers with a task at once: to this caller where it takes
        // an event stream, and to a later one that does.
        let relaying = match self.as_task {
            true => None,
            false => {
                let listens = message::accepts(&parts.headers, "text/event-stream");
                let call = (&self.call, self.server);
                let relayed = relayed(&self.endpoint, parts, call, listens);
                self.outlet = std::sync::Mutex::new(Some(relayed.outlet));
                self.attached = relayed.attached;
                Some(relayed.relaying)
            }
        };
        Call {
            protocol: Protocol::Mcp,
            timing: self.timing,
            relaying,
        }
    }

    fn work(
        &self,
        mut inner: S,
        mut parts: Parts,
        mut bytes: Bytes,
    ) -> impl Future<Output = Result<Reading<ServerAnswer>, S::Error>> + Send + 'static {
        let names_extension = self.call.meta.tasks_extension;
        let era = self.era;
        let id = self.call.id.clone();
        let limit = self.endpoint.engine.settings.response_limit;
        let outlet = (self.outlet.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        async move {
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
        }
    }

    fn render(&self, decided: Decision<ServerAnswer>) -> Response<ResponseBody<ResBody>> {
        self.rendering(self.form)
            .written(decided)
            .map(ResponseBody::full)
    }

    async fn answer_running(
        mut self,
        running: Running<ServerAnswer, S::Error>,
        telling: Telling,
    ) -> Answer<ResBody, S::Error> {
        match self.attached.take() {
            Some((attached, slot)) => {
                let live = Live { mcp: self, telling };
                live::answer(live, slot, running, attached).await
            }
            None => {
                let decided = running.instrument(telling.span.clone()).await;
                finish::<_, S, B, ResBody>(&self, &telling, decided)
            }
        }
    }
}

/// What relaying one call takes: the relay its execution writes to should it run it, where
/// the stream's messages go, and, for a caller that `listens`, where its attachment comes
/// back, with the call's slot for its cancellation.
struct RelaySetup {
    relaying: Relaying,
    outlet: Outlet,
    attached: Option<(oneshot::Receiver<Attachment>, u128)>,
}

fn relayed<St>(
    endpoint: &Endpoint<St>,
    parts: &Parts,
    (call, server): (&ToolCall, Server),
    listens: bool,
) -> RelaySetup {
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
        changes: ListChanges::of(&endpoint.policy, server),
    };
    RelaySetup {
        relaying: Relaying { relay, attachment },
        outlet,
        attached,
    }
}

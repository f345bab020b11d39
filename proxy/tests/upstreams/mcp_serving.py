"""How the test MCP servers are served: on a loopback port (the first argument, 0 for a free
one) that they print once listening, with an event store kept in memory, every event of every
stream in order, so that a stream the server closed can be resumed after an id (SEP-1699)."""

import socket
import sys

import uvicorn
from mcp.server.streamable_http import EventMessage, EventStore


class MemoryEventStore(EventStore):
    """Every event of every stream, in order, so that a stream can be replayed after an id."""

    def __init__(self):
        self.events = []  # (event id, stream id, message or None for a priming event)

    async def store_event(self, stream_id, message):
        event_id = str(len(self.events))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        at = next((i for i, (e, _, _) in enumerate(self.events) if e == last_event_id), None)
        if at is None:
            return None
        stream = self.events[at][1]
        for event_id, stream_id, message in self.events[at + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def serve(server, retry_interval, routes=None):
    """Serves `server`'s Streamable HTTP endpoint at `/mcp`, asking clients to resume a closed
    stream after `retry_interval` milliseconds; a low-level `Server` serves `routes` beside
    it (an `MCPServer` has its own `custom_route`)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    extra = {"custom_starlette_routes": routes} if routes else {}
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        event_store=MemoryEventStore(),
        retry_interval=retry_interval,
        **extra,
    )
    config = uvicorn.Config(app, log_level="warning")
    print(f"listening on {port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])

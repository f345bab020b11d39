"""An event store kept in memory, for the test MCP servers: every event of every stream, in
order, so that a stream the server closed can be resumed after an id (SEP-1699)."""

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

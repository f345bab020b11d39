#!/usr/bin/env python3
"""An MCP server built with the official Python SDK (`mcp`'s MCPServer), over Streamable
HTTP at /mcp, for the proxy's tests. It knows nothing of idempotency.

    mcp_server.py [PORT]      (0 or nothing: a free port; prints "listening on PORT" once it
                               accepts connections)

Tools: send_email(to, subject, body, delay_ms) sends (counts) after `delay_ms`, unless
cancelled first; generate_report(topic, seconds) counts after `seconds`; search(query) is
read-only; regional_send(to, region) names its region in an `Mcp-Param-Region` header too
(2026-07-28), which the server checks; polled_send(to, delay_ms) closes its event stream after a priming event (the
SDK's `close_sse_stream`, SEP-1699: handshake-era clients resume it with GET and
`Last-Event-ID`), then sends (counts) after `delay_ms`; confirm_send(to) asks its user for a
word (the SDK's `ctx.elicit`, a request on the call's event stream) and sends (counts) with
it; slow_progress(topic) reports progress every half second, six times, then counts.
GET /stats gives the counts per tool, "cancelled": how many running calls a cancellation
reached, "confirmed_with": the words confirm_send was given, "started": the calls of
send_email and polled_send begun, and "closed_streams": the event streams polled_send
closed.

The server keeps its events in memory so that a stream can be resumed, and primes each
handshake-era stream with an event id and a 200 ms retry.
"""

import asyncio
import sys
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse
from mcp_serving import serve

server = MCPServer("python-tools")
COUNTS = {"send_email": 0, "generate_report": 0, "search": 0, "polled_send": 0,
          "regional_send": 0, "cancelled": 0, "confirm_send": 0, "slow_progress": 0,
          "confirmed_with": [], "started": {"send_email": 0, "polled_send": 0},
          "closed_streams": 0}


@server.tool()
async def send_email(to: str, subject: str, body: str, delay_ms: int = 0) -> str:
    """Sends an e-mail."""
    COUNTS["started"]["send_email"] += 1
    try:
        await asyncio.sleep(delay_ms / 1000)
    except asyncio.CancelledError:
        COUNTS["cancelled"] += 1
        raise
    COUNTS["send_email"] += 1
    return f"sent to {to} (msg_{COUNTS['send_email']})"


@server.tool()
async def generate_report(topic: str, seconds: float = 0.0) -> str:
    """Writes a report, slowly."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        COUNTS["cancelled"] += 1
        raise
    COUNTS["generate_report"] += 1
    return f"report on {topic} (report_{COUNTS['generate_report']})"


@server.tool()
async def polled_send(to: str, delay_ms: int, ctx: Context) -> str:
    """Sends an e-mail, letting the client poll for the answer."""
    COUNTS["started"]["polled_send"] += 1
    await asyncio.sleep(0.05)
    await ctx.close_sse_stream()
    COUNTS["closed_streams"] += 1
    await asyncio.sleep(delay_ms / 1000)
    COUNTS["polled_send"] += 1
    return f"sent to {to} (polled_{COUNTS['polled_send']})"


@server.tool()
async def regional_send(
    to: str, region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
) -> str:
    """Sends an e-mail from a region that 2026-07-28 clients also name in a header."""
    COUNTS["regional_send"] += 1
    return f"sent to {to} from {region} (regional_{COUNTS['regional_send']})"


class Confirmation(BaseModel):
    word: str


@server.tool()
async def confirm_send(to: str, ctx: Context) -> str:
    """Sends an e-mail once its user confirms it with a word."""
    answer = await ctx.elicit(f"Send the e-mail to {to}? Type a word to confirm.", Confirmation)
    if answer.action != "accept":
        return f"not sent to {to}: {answer.action}"
    COUNTS["confirm_send"] += 1
    COUNTS["confirmed_with"].append(answer.data.word)
    return f"sent to {to} with {answer.data.word} (confirmed_{COUNTS['confirm_send']})"


@server.tool()
async def slow_progress(topic: str, ctx: Context) -> str:
    """Writes a report in six steps of half a second, reporting each."""
    for step in range(1, 7):
        await asyncio.sleep(0.5)
        await ctx.report_progress(step, 6, f"step {step}")
    COUNTS["slow_progress"] += 1
    return f"report on {topic} (progress_{COUNTS['slow_progress']})"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def search(query: str) -> str:
    """Searches, changing nothing."""
    COUNTS["search"] += 1
    return f"results for {query}"


@server.custom_route("/stats", methods=["GET"])
async def stats(request: Request) -> JSONResponse:
    return JSONResponse(COUNTS)


def main():
    serve(server, retry_interval=200)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""An MCP server built with the official Python SDK (`mcp`'s MCPServer), over Streamable
HTTP at /mcp, for the proxy's tests. It knows nothing of idempotency.

    mcp_server.py [PORT]      (0 or nothing: a free port; prints "listening on PORT" once it
                               accepts connections)

Tools: send_email(to, subject, body, delay_ms) sends (counts) after `delay_ms`, unless
cancelled first; generate_report(topic, seconds) counts after `seconds`; search(query) is
read-only. GET /stats gives the counts per tool, and "cancelled": how many running calls a
cancellation reached.
"""

import asyncio
import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse

server = MCPServer("python-tools")
COUNTS = {"send_email": 0, "generate_report": 0, "search": 0, "cancelled": 0}


@server.tool()
async def send_email(to: str, subject: str, body: str, delay_ms: int = 0) -> str:
    """Sends an e-mail."""
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


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def search(query: str) -> str:
    """Searches, changing nothing."""
    COUNTS["search"] += 1
    return f"results for {query}"


@server.custom_route("/stats", methods=["GET"])
async def stats(request: Request) -> JSONResponse:
    return JSONResponse(COUNTS)


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    app = server.streamable_http_app(streamable_http_path="/mcp")
    config = uvicorn.Config(app, log_level="warning")
    print(f"listening on {port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""An MCP client built on the official Python SDK (the Python package `mcp`), for interop tests.

    python_client.py --url http://127.0.0.1:PORT/mcp --scenario NAME

It talks to the crate's `mcp_server` example over Streamable HTTP (the `initialize`
handshake, one `Mcp-Session-Id` for the whole run), then prints ONE line of JSON on
stdout with what it saw, including the server's `GET /stats` execution counts.
Debugging goes to stderr. Exit 0 once the scenario ran, whatever it saw (the Rust
test judges); exit 2 if it could not run at all.

Scenarios:
  timeout_retry     send_email taking 1.5 s, called with the SDK's own 400 ms
                    timeout: on timeout the SDK itself sends `notifications/cancelled`
                    for that request id; the same call is retried (fresh id) until
                    one is answered. The e-mail must have been sent exactly once.
  fresh_id_replay   the same send_email twice (two ids): the second is a replay.
  slow_in_progress  the tools listed, then generate_report taking 2 s against a
                    500 ms deadline: the first answer is an "in progress" tool
                    result; the same call is repeated every 500 ms until the
                    real report comes back.
  two_sessions      the same send_email in this session and in a second one: it
                    runs once in each, and a repeat in the second is a replay.
"""

import argparse
import asyncio
import json
import sys
import traceback
import urllib.request
import uuid

from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types.jsonrpc import REQUEST_TIMEOUT

IN_PROGRESS = "This action is already running"


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def stats(url):
    """The server's executions per tool, from GET {root}/stats."""
    root = url.rstrip("/").removesuffix("/mcp")
    with urllib.request.urlopen(f"{root}/stats", timeout=10) as resp:
        return json.load(resp)


def first_text(result):
    """The result's text blocks, one per line (a replay leads with a notice)."""
    texts = [block.text for block in result.content if getattr(block, "text", None)]
    return "\n".join(texts) if texts else None


async def call(session, name, args, timeout):
    """One tools/call: (text, result); text is "timeout" or "error CODE: ..." on failure."""
    try:
        result = await session.call_tool(name, args, read_timeout_seconds=timeout)
    except MCPError as e:
        if e.code == REQUEST_TIMEOUT:
            return "timeout", None
        return f"error {e.code}: {e.message}", None
    return first_text(result), result


async def timeout_retry(session, url, suffix):
    # The SDK's timeout, not a hand-sent notification, is what cancels each attempt.
    args = {
        "to": f"timeout-{suffix}@example.com",
        "subject": "Quarterly numbers",
        "body": "See attached.",
        "delay_ms": 1500,
    }
    texts, final = [], None
    for attempt in range(12):
        if attempt:
            await asyncio.sleep(0.3)
        text, result = await call(session, "send_email", args, timeout=0.4)
        log(f"attempt {attempt + 1}: {text}")
        texts.append(text)
        if result is not None:
            final = text
            break
    # send_email must have run once, however many attempts were cancelled.
    return {"attempts": len(texts), "texts": texts, "final_text": final, "stats": stats(url)}


async def fresh_id_replay(session, url, suffix):
    # Same arguments, new request id: the second answer replays the first.
    args = {"to": f"replay-{suffix}@example.com", "subject": "Hello", "body": "Hi there."}
    first, _ = await call(session, "send_email", args, timeout=None)
    second, _ = await call(session, "send_email", args, timeout=None)
    return {"texts": [first, second], "stats": stats(url)}


async def slow_in_progress(session, url, suffix):
    # The first answer comes at the server's deadline and says "in progress";
    # asking again with the same arguments ends in the one real report.
    args = {"topic": f"churn-{suffix}", "seconds": 2.0}
    await session.list_tools()  # as hosts do before calling: the layer learns the tools
    texts, first = [], None
    for attempt in range(20):
        if attempt:
            await asyncio.sleep(0.5)
        text, result = await call(session, "generate_report", args, timeout=10.0)
        log(f"try {attempt + 1}: {text}")
        texts.append(text)
        if first is None and result is not None:
            first = result
        if result is not None and not (text or "").startswith(IN_PROGRESS):
            break
    return {
        "texts": texts,
        "first_structured_content": first.structured_content if first else None,
        "first_is_error": first.is_error if first else None,
        "stats": stats(url),
    }


async def two_sessions(session, url, suffix):
    # The same call in a second session runs again there: sessions never share an intent.
    args = {"to": f"sessions-{suffix}@example.com", "subject": "Hello", "body": "Hi there."}
    first, _ = await call(session, "send_email", args, timeout=None)
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as other:
            await other.initialize()
            second, _ = await call(other, "send_email", args, timeout=None)
            again, _ = await call(other, "send_email", args, timeout=None)
    return {"texts": [first, second, again], "stats": stats(url)}


SCENARIOS = {
    "timeout_retry": timeout_retry,
    "fresh_id_replay": fresh_id_replay,
    "slow_in_progress": slow_in_progress,
    "two_sessions": two_sessions,
}


async def run(url, scenario, report):
    """Fills `report` as soon as the scenario is done, so a failing teardown loses nothing."""
    suffix = uuid.uuid4().hex[:12]  # a distinct intent for every run
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            log(f"protocol {init.protocol_version}, server {init.server_info.name}")
            before = stats(url)
            observed = await SCENARIOS[scenario](session, url, suffix)
            report.update(observed, stats_before=before, protocol_version=init.protocol_version)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    args = parser.parse_args()
    report = {}
    try:
        asyncio.run(run(args.url, args.scenario, report))
    except Exception:
        log(traceback.format_exc())
        if not report:  # could not run: no server, no session, no stats
            log(f"{args.scenario} could not run")
            return 2
        log("(the scenario ran; the error above came while closing the session)")
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

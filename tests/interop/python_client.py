#!/usr/bin/env python3
"""An MCP client built on the official Python SDK (the Python package `mcp`), for interop tests.

    python_client.py --url http://127.0.0.1:PORT/mcp --scenario NAME [--mode auto|legacy]
                     [--header NAME=VALUE ...] [--other-header NAME=VALUE ...]

It uses the SDK's high-level `Client` with its defaults: `mode="auto"` probes
`server/discover` and speaks protocol 2026-07-28 to a server that serves it (one
self-contained POST per request, no session); `--mode legacy` forces the handshake era
(`initialize`, one `Mcp-Session-Id` for the whole run). `--header` adds a header to every
request (an `Authorization` bearer token, a principal header); `--other-header` is the
header of a second caller, for the scenarios that have one.

It prints ONE line of JSON on stdout with what it saw, including the server's `GET /stats`
execution counts. Debugging goes to stderr. Exit 0 once the scenario ran, whatever it saw
(the Rust test judges); exit 2 if it could not run at all. Every exception a call raises is
reported by its type, so that a result the client rejects (a `ValidationError`) shows.

Scenarios:
  timeout_retry     send_email taking 1.5 s, called with the SDK's own 400 ms timeout
                    (2026-07-28: the SDK closes the request's stream; handshake era: it
                    sends `notifications/cancelled`); the same call is retried until one
                    is answered. The e-mail must have been sent exactly once.
  fresh_id_replay   the same send_email twice (two ids): the second is a replay.
  slow_in_progress  generate_report taking 2 s against a 500 ms deadline: the first answer
                    is an "in progress" tool result; the same call is repeated every
                    500 ms until the real report comes back.
  two_callers       the same send_email as this caller and as a second one (a second
                    client with `--other-header`, or a second session in the handshake
                    era): it runs once for each, and a repeat by the second is a replay.
  one_call          one send_email; reports its text and the protocol spoken.
  elicit_retry      confirm_send, whose tool asks its user for a word (elicitation), called
                    with the SDK's 1.5 s timeout by a user who answers 2.5 s after first
                    seeing the question, in the prompt of the attempt still waiting (a prompt
                    of an attempt given up is left unanswered); retried until answered.
  progress_order    slow_progress (six progress notifications over 3 s) called with a
                    progress callback, and 0.7 s later the same call again in the same
                    session (a duplicate) with its own; reports when each notification came.

Against checked_server.py (proxy/tests/upstreams), whose send_mail declares its schema:
  bad_arguments     the tools listed, then send_mail with a count below its minimum, without
                    its required `to`, and with good arguments; reports each answer.
  changed_schema_on_call, changed_schema_on_session, changed_schema_on_listen
                    the tools listed; change_tools changes send_mail's schema and says so on
                    its call's stream, on the session's stream or to a `subscriptions/listen`
                    stream this client opened; once the client has heard it, send_mail with a
                    count only the changed schema allows (not listed again); then, the tools
                    listed again, with a count only the first schema allowed.
"""

import argparse
import asyncio
import json
import sys
import time
import traceback
import urllib.request
import uuid

import mcp_types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# The SDK's code for a request that timed out on the client's side.
REQUEST_TIMEOUT = -32001


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def stats(url):
    """The server's executions per tool, from GET {root}/stats."""
    root = url.rstrip("/").removesuffix("/mcp")
    with urllib.request.urlopen(f"{root}/stats", timeout=10) as resp:
        return json.load(resp)


def texts_of(result):
    """The result's text blocks, one per line (a replay leads with a notice)."""
    texts = [block.text for block in result.content if getattr(block, "text", None)]
    return "\n".join(texts) if texts else None


class Changes:
    """The client's message handler: notes the server's word that its tools changed."""

    def __init__(self):
        self.heard = asyncio.Event()

    async def __call__(self, message):
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.heard.set()


class Caller:
    """One SDK `Client` with its own headers, opened for the scenario."""

    def __init__(self, url, mode, headers, user=None):
        self.url, self.mode, self.headers, self.user = url, mode, headers, user
        self.changes = Changes()

    async def __aenter__(self):
        self.http = create_mcp_http_client(headers=self.headers)
        await self.http.__aenter__()
        transport = streamable_http_client(self.url, http_client=self.http)
        callback = self.user.elicit if self.user is not None else None
        self.client = Client(
            transport, mode=self.mode, elicitation_callback=callback, message_handler=self.changes
        )
        await self.client.__aenter__()
        log(f"protocol {self.client.protocol_version}")
        return self

    async def __aexit__(self, *exc):
        try:
            await self.client.__aexit__(*exc)
        finally:
            await self.http.__aexit__(*exc)

    @property
    def protocol(self):
        return self.client.protocol_version

    async def call(self, name, args, timeout=None, progress=None):
        """One tools/call: (text, result). On failure the text says what was raised:
        "timeout", "error CODE: ..." for an MCP error, "raised TYPE: ..." for anything else
        (a result the SDK rejected)."""
        try:
            result = await self.client.call_tool(
                name, args, read_timeout_seconds=timeout, progress_callback=progress
            )
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                return "timeout", None
            return f"error {e.code}: {e.message}", None
        except Exception as e:  # noqa: BLE001 - the test reports what the SDK raised
            return f"raised {type(e).__name__}: {e}", None
        return texts_of(result), result


async def timeout_retry(caller, other, url, suffix):
    # The SDK's timeout, not a hand-sent message, is what gives up on each attempt.
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
        text, result = await caller.call("send_email", args, timeout=0.4)
        log(f"attempt {attempt + 1}: {text}")
        texts.append(text)
        if result is not None:
            final = text
            break
    return {"attempts": len(texts), "texts": texts, "final_text": final, "stats": stats(url)}


async def fresh_id_replay(caller, other, url, suffix):
    # Same arguments, new request id: the second answer replays the first.
    args = {"to": f"replay-{suffix}@example.com", "subject": "Hello", "body": "Hi there."}
    first, _ = await caller.call("send_email", args)
    second, result = await caller.call("send_email", args)
    return {
        "texts": [first, second],
        "replay_meta": (result.meta or {}) if result is not None else None,
        "stats": stats(url),
    }


async def slow_in_progress(caller, other, url, suffix):
    # The first answer comes at the server's deadline and says "in progress"; asking again
    # with the same arguments ends in the one real report.
    args = {"topic": f"churn-{suffix}", "seconds": 2.0}
    await caller.client.list_tools()  # as hosts do before calling: the layer learns the tools
    texts, first = [], None
    for attempt in range(20):
        if attempt:
            await asyncio.sleep(0.5)
        text, result = await caller.call("generate_report", args, timeout=10.0)
        log(f"try {attempt + 1}: {text}")
        texts.append(text)
        if first is None and result is not None:
            first = result
        in_progress = (result.structured_content or {}).get("outcome") == "in_progress" if result else False
        if not in_progress:
            break
    return {
        "texts": texts,
        "first_structured_content": first.structured_content if first else None,
        "first_is_error": first.is_error if first else None,
        "stats": stats(url),
    }


async def two_callers(caller, other, url, suffix):
    # The same call by a second caller runs again for it: callers never share an intent.
    args = {"to": f"callers-{suffix}@example.com", "subject": "Hello", "body": "Hi there."}
    first, _ = await caller.call("send_email", args)
    async with other as second_caller:
        second, _ = await second_caller.call("send_email", args)
        again, _ = await second_caller.call("send_email", args)
    return {"texts": [first, second, again], "stats": stats(url)}


async def one_call(caller, other, url, suffix):
    args = {"to": f"one-{suffix}@example.com", "subject": "Hello", "body": "Hi there."}
    text, result = await caller.call("send_email", args)
    return {
        "texts": [text],
        "is_error": result.is_error if result is not None else None,
        "structured_content": result.structured_content if result is not None else None,
        "stats": stats(url),
    }


class User:
    """A user who answers a tool's question `after` seconds after first seeing it, in the
    prompt shown last (the attempt still waiting); an earlier prompt is left unanswered."""

    def __init__(self, after):
        self.after, self.asks, self.started = after, [], time.monotonic()

    async def elicit(self, context, params):
        self.asks.append({"id": context.request_id, "at": round(time.monotonic() - self.started, 3)})
        number = len(self.asks)
        log(f"asked ({number}): {params.message}")
        answer_at = self.started + self.asks[0]["at"] + self.after
        await asyncio.sleep(max(0.0, answer_at - time.monotonic()))
        if number != len(self.asks):
            await asyncio.Event().wait()  # a prompt the user never answers
        return mcp_types.ElicitResult(action="accept", content={"word": f"yes-{number}"})


def in_progress(result):
    return result is not None and (result.structured_content or {}).get("outcome") == "in_progress"


async def elicit_retry(caller, other, url, suffix):
    args = {"to": f"confirm-{suffix}@example.com"}
    texts, final = [], None
    for attempt in range(12):
        if attempt:
            await asyncio.sleep(0.1)
        text, result = await caller.call("confirm_send", args, timeout=1.5)
        log(f"attempt {attempt + 1}: {text}")
        texts.append(text)
        if result is not None and not in_progress(result):
            final = text
            break
    return {"attempts": len(texts), "texts": texts, "final_text": final, "asks": caller.user.asks,
            "stats": stats(url)}


async def progress_order(caller, other, url, suffix):
    args = {"topic": f"progress-{suffix}"}
    started = time.monotonic()
    seen = {"first": [], "duplicate": []}

    def recorder(who):
        async def record(progress, total, message):
            seen[who].append({"progress": progress, "at": round(time.monotonic() - started, 3)})
        return record

    async def duplicate():
        await asyncio.sleep(0.7)
        return await caller.call("slow_progress", args, timeout=30.0, progress=recorder("duplicate"))

    first, second = await asyncio.gather(
        caller.call("slow_progress", args, timeout=30.0, progress=recorder("first")), duplicate()
    )
    return {"texts": [first[0], second[0]], "progress": seen,
            "answered_at": round(time.monotonic() - started, 3), "stats": stats(url)}


async def bad_arguments(caller, other, url, suffix):
    await caller.client.list_tools()  # as hosts do before calling: the layer learns the schemas
    to = f"args-{suffix}@example.com"
    calls = {}
    for name, args in (
        ("low_count", {"to": to, "count": 0}),
        ("no_to", {"count": 2}),
        ("good", {"to": to, "count": 2}),
    ):
        text, result = await caller.call("send_mail", args)
        log(f"{name}: {text}")
        calls[name] = {"text": text, "is_error": result.is_error if result is not None else None}
    return {"calls": calls, "stats": stats(url)}


async def changed_schema(caller, url, suffix, where):
    await caller.client.list_tools()
    to = f"changed-{suffix}@example.com"
    if where == "listen":
        async with caller.client.listen(tools_list_changed=True) as subscription:
            said, _ = await caller.call("change_tools", {"where": where})
            await asyncio.wait_for(anext(subscription), 10)
    else:
        said, _ = await caller.call("change_tools", {"where": where})
        await asyncio.wait_for(caller.changes.heard.wait(), 10)
    log(f"change_tools: {said}")
    # Allowed by the changed schema only, and sent before the tools are listed again.
    now_allowed, result = await caller.call("send_mail", {"to": to, "count": 0})
    calls = {"now_allowed": {"text": now_allowed, "is_error": result.is_error if result else None}}
    await caller.client.list_tools()
    # Allowed by the first schema only.
    no_longer, result = await caller.call("send_mail", {"to": to, "count": 5})
    calls["no_longer_allowed"] = {"text": no_longer, "is_error": result.is_error if result else None}
    return {"said": said, "calls": calls, "stats": stats(url)}


def changed_schema_on(where):
    async def scenario(caller, other, url, suffix):
        return await changed_schema(caller, url, suffix, where)

    return scenario


SCENARIOS = {
    "bad_arguments": bad_arguments,
    "changed_schema_on_call": changed_schema_on("call"),
    "changed_schema_on_session": changed_schema_on("session"),
    "changed_schema_on_listen": changed_schema_on("listen"),
    "elicit_retry": elicit_retry,
    "progress_order": progress_order,
    "timeout_retry": timeout_retry,
    "fresh_id_replay": fresh_id_replay,
    "slow_in_progress": slow_in_progress,
    "two_callers": two_callers,
    "one_call": one_call,
}


def headers_of(pairs):
    return dict(pair.split("=", 1) for pair in pairs)


async def run(args, report):
    """Fills `report` as soon as the scenario is done, so a failing teardown loses nothing."""
    suffix = args.suffix or uuid.uuid4().hex[:12]  # a distinct intent for every run
    headers = headers_of(args.header)
    # Without --other-header the second caller differs by its session alone (handshake era).
    other = Caller(args.url, args.mode, headers_of(args.other_header) or headers)
    user = User(after=2.5) if args.scenario == "elicit_retry" else None
    async with Caller(args.url, args.mode, headers, user) as caller:
        before = stats(args.url)
        observed = await SCENARIOS[args.scenario](caller, other, args.url, suffix)
        report.update(observed, stats_before=before, protocol_version=caller.protocol)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"])
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--other-header", action="append", default=[])
    parser.add_argument("--suffix", help="the intent's suffix, to repeat a run's calls")
    args = parser.parse_args()
    report = {}
    try:
        asyncio.run(run(args, report))
    except BaseException:  # noqa: BLE001 - an ExceptionGroup from the transport included
        log(traceback.format_exc())
        if not report:  # could not run: no server, no connection, no stats
            log(f"{args.scenario} could not run")
            return 2
        log("(the scenario ran; the error above came while closing the client)")
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

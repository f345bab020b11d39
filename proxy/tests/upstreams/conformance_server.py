#!/usr/bin/env python3
"""The server the official MCP conformance suite's server scenarios call, built with the
official Python SDK (`mcp` 2.3.0's MCPServer), over Streamable HTTP at /mcp. Written for this
project's tests from what the suite's scenarios ask (their tool, resource and prompt names,
and the answers they check); it knows nothing of idempotency.

    conformance_server.py [PORT]   (0 or nothing: a free port; prints "listening on PORT"
                                    once it accepts connections)

The tools that talk to their caller while they run, or ask it for input first, are in
`conformance_asking.py`. Events are kept in memory so that a stream can be resumed (the
handshake era's polling), and each handshake-era stream is primed with an event id and a
100 ms retry.
"""

import asyncio
import base64
import json
import sys
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import Field

import conformance_asking
from conformance_asking import field, question
from mcp_serving import serve

# A 1x1 PNG and a silent WAV: the bytes the content scenarios check for.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# The request-state scenarios need sealed state; any 32 bytes or more serve a test.
SEAL = b"conformance-tests-request-state-sealing-key"

server = MCPServer(
    name="conformance-server",
    version="1.0.0",
    request_state_security=RequestStateSecurity(keys=[SEAL]),
)


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def image() -> ImageContent:
    return ImageContent(type="image", data=PNG, mime_type="image/png")


def embedded(uri: str, mime: str, body: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=body)
    )


# --- Tools whose answer is fixed content ---

@server.tool()
def test_simple_text() -> str:
    """Answers with one text block."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> list[ImageContent]:
    """Answers with one PNG image."""
    return [image()]


@server.tool()
def test_audio_content() -> list[AudioContent]:
    """Answers with one WAV clip."""
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@server.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Answers with an embedded text resource."""
    return [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@server.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Answers with text, an image and a resource together."""
    return [
        text("Multiple content types test:"),
        image(),
        embedded("test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}'),
    ]


@server.tool()
def test_error_handling() -> str:
    """Fails, as a tool error."""
    raise RuntimeError("This tool intentionally returns an error for testing")


# Tools that talk to the client while they run, or ask it for input first.
conformance_asking.register(server)


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its event stream mid-call, for the client to resume it (SEP-1699)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@server.tool()
def test_x_mcp_header(
    region: Annotated[
        str,
        Field(description="Also sent as Mcp-Param-Region", json_schema_extra={"x-mcp-header": "Region"}),
    ] = "<none>",
) -> str:
    """Names its region in an `Mcp-Param-Region` header too, which the server checks (SEP-2243)."""
    return f"region={region}"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Refuses, as a JSON-RPC error, a client that cannot sample."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool requires the client 'sampling' capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "Client declared sampling capability; proceeding."


# The JSON Schema 2020-12 keywords a tool's input schema must keep (SEP-1613).
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(name="json_schema_2020_12_tool")
def json_schema_tool() -> str:
    """Has an input schema with JSON Schema 2020-12 keywords."""
    return "json_schema_2020_12_tool"


# MCPServer derives a tool's schema from its signature and has no public way to give one.
server._tool_manager._tools["json_schema_2020_12_tool"].parameters = SCHEMA_2020_12


# --- Resources ---

@server.resource("test://static-text")
def static_text() -> str:
    """A fixed text."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary")
def static_binary() -> bytes:
    """A fixed PNG."""
    return base64.b64decode(PNG)


@server.resource("test://template/{id}/data")
def templated(id: str) -> str:
    """JSON naming the id it was read with."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource")
def watched() -> str:
    """A resource a client may subscribe to."""
    return "Watched resource content"


# --- Prompts ---

@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [UserMessage(role="user", content=text("This is a simple prompt for testing."))]


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    return [UserMessage(role="user", content=text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that embeds the resource it names."""
    resource = embedded(resourceUri, "text/plain", "Embedded resource content for testing.")
    return [
        UserMessage(role="user", content=resource),
        UserMessage(role="user", content=text("Please process the embedded resource above.")),
    ]


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with an image."""
    return [
        UserMessage(role="user", content=image()),
        UserMessage(role="user", content=text("Please analyze the image above.")),
    ]


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """A prompt that asks the caller's user for its context first (SEP-2322)."""
    answers = ctx.input_responses or {}
    if "user_context" in answers:
        context = field(answers["user_context"], "context", "?")
        return [UserMessage(role="user", content=text(f"Use the following context: {context}"))]
    ask_context = question("What context should the prompt use?", "context")
    return InputRequiredResult(input_requests={"user_context": ask_context})


# --- Logging level, subscriptions, completions ---

SUBSCRIBED: set[str] = set()


async def set_level(ctx, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


async def subscribe(ctx, params: SubscribeRequestParams) -> EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx, params: UnsubscribeRequestParams) -> EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return EmptyResult()


# MCPServer has no decorator for these three requests: its low-level server takes them.
server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


@server.completion()
async def complete(ref, argument, context) -> Completion:
    """No suggestions: the scenario checks the shape of the answer."""
    return Completion(values=[], total=0, has_more=False)


def main():
    serve(server, retry_interval=100)


if __name__ == "__main__":
    sys.exit(main())

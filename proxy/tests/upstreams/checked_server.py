#!/usr/bin/env python3
"""An MCP server built on the official Python SDK's low-level `Server`, whose tools declare
their `inputSchema` as written here and whose handler checks no argument: what reaches it
runs. For the tests of arguments checked against the listed schema.

    checked_server.py [PORT]      (0 or nothing: a free port; prints "listening on PORT")

Tools:
  send_mail(to, count)   counts each call it runs, with its arguments. Its schema, first:
                         `to` an e-mail address (required), `count` an integer of at least 1;
                         once changed: `count` an integer from 0 to 3.
  change_tools(where)    changes send_mail's schema and says the tools changed
                         (`notifications/tools/list_changed`): on this call's own event stream
                         (`where` = "call", the handshake era), on the server's stream of the
                         session (`where` = "session", the handshake era's GET stream), or to
                         every `subscriptions/listen` stream (`where` = "listen", 2026-07-28).

GET /stats gives "send_mail": the calls it ran, "arguments": theirs, and "schema": which
schema send_mail declares ("first" or "changed").
"""

import sys

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from mcp_serving import serve

SCHEMAS = {
    "first": {
        "type": "object",
        "properties": {
            "to": {"type": "string", "format": "email"},
            "count": {"type": "integer", "minimum": 1},
        },
        "required": ["to"],
    },
    "changed": {
        "type": "object",
        "properties": {
            "to": {"type": "string", "format": "email"},
            "count": {"type": "integer", "minimum": 0, "maximum": 3},
        },
        "required": ["to"],
    },
}
STATS = {"send_mail": 0, "arguments": [], "schema": "first"}
BUS = InMemorySubscriptionBus()


def text(words):
    return types.CallToolResult(content=[types.TextContent(type="text", text=words)])


async def list_tools(ctx, params):
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="send_mail",
                description="Sends an e-mail, count times.",
                input_schema=SCHEMAS[STATS["schema"]],
            ),
            types.Tool(
                name="change_tools",
                description="Changes send_mail's schema.",
                input_schema={"type": "object", "properties": {"where": {"type": "string"}}},
            ),
        ]
    )


async def call_tool(ctx, params):
    arguments = params.arguments or {}
    if params.name == "send_mail":
        STATS["send_mail"] += 1
        STATS["arguments"].append(arguments)
        return text(f"sent to {arguments.get('to')} (mail_{STATS['send_mail']})")
    if params.name == "change_tools":
        STATS["schema"] = "changed"
        where = arguments.get("where", "call")
        if where == "listen":
            await BUS.publish(ToolsListChanged())
        else:
            related = ctx.request_id if where == "call" else None
            await ctx.session.send_notification(
                types.ToolListChangedNotification(), related_request_id=related
            )
        return text(f"send_mail's schema changed; said on the {where} stream")
    raise ValueError(f"no tool {params.name}")


async def stats(request: Request) -> JSONResponse:
    return JSONResponse(STATS)


server = Server(
    "checked-tools",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_subscriptions_listen=ListenHandler(BUS),
)


def main():
    serve(server, retry_interval=200, routes=[Route("/stats", stats, methods=["GET"])])


if __name__ == "__main__":
    sys.exit(main())

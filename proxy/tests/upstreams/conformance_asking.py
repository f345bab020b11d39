"""The conformance server's tools that talk to their caller while they run (logs, progress,
sampling and elicitation on the call's stream) or that answer by asking it for input first
(SEP-2322, 2026-07-28); `conformance_server.py` registers them. Written for this project's
tests from what the conformance suite's scenarios ask.
"""

import asyncio
import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel, Field


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


class Reply(BaseModel):
    response: str = Field(description="User's response")


class Defaults(BaseModel):
    """Every primitive type, each with a default (SEP-1034)."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


def choices(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


class Enums(BaseModel):
    """The ways a schema offers a choice (SEP-1330)."""

    untitledSingle: str = Field(
        description="Simple enum without titles",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    titledSingle: str = Field(
        description="Enum with titled options (oneOf)",
        json_schema_extra={
            "oneOf": choices(("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority"))
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}},
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        json_schema_extra={
            "items": {"anyOf": choices(("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation"))}
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={"enum": ["small", "medium", "large"], "enumNames": ["Small Size", "Medium Size", "Large Size"]},
    )


async def ask(ctx: Context, message: str, schema: type[BaseModel]) -> str:
    """The user's answer to `message`, as `action=..., content=...`."""
    answer = await ctx.elicit(message=message, schema=schema)
    content = answer.data.model_dump_json() if answer.action == "accept" else "{}"
    return f"action={answer.action}, content={content}"


def question(message: str, field: str = "name") -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def confirmation() -> ElicitRequest:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    return ElicitRequest(params=ElicitRequestFormParams(message="Please confirm", requested_schema=schema))


def completion(prompt: str, max_tokens: int) -> CreateMessageRequest:
    messages = [SamplingMessage(role="user", content=text(prompt))]
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=messages, max_tokens=max_tokens))


def field(answer: Any, name: str, otherwise: Any = None) -> Any:
    """`name` in an accepted form's content, else `otherwise`."""
    if isinstance(answer, ElicitResult) and answer.content:
        return answer.content.get(name, otherwise)
    return otherwise


def register(server: MCPServer):
    """Adds the tools to `server`."""

    # Tools that talk to the client while they run

    @server.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Logs three messages while it runs."""
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(step)
            await asyncio.sleep(0.05)
        return "Tool with logging executed successfully"

    @server.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress at 0, 50 and 100 of 100; answers with the progress token."""
        for done in (0, 50, 100):
            await ctx.report_progress(progress=done, total=100, message=f"Completed step {done} of 100")
            await asyncio.sleep(0.05)
        meta = ctx.request_context.meta if ctx.request_context else None
        return str(meta.get("progress_token", 0) if meta else 0)

    @server.tool()
    async def test_sampling(prompt: str, ctx: Context) -> str:
        """Asks the client's model to complete `prompt`, on this call's stream."""
        answer = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=text(prompt))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
        said = answer.content.text if answer.content.type == "text" else "No response"
        return f"LLM response: {said}"

    @server.tool()
    async def test_elicitation(message: str, ctx: Context) -> str:
        """Asks the user `message`."""
        return "User response: " + await ask(ctx, message, Reply)

    @server.tool()
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Asks the user with a form whose fields have defaults."""
        return "Elicitation result: " + await ask(ctx, "Please provide user information", Defaults)

    @server.tool()
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Asks the user to choose, every way a schema offers choices."""
        message = "Please select values using different enum schema types"
        return "Elicitation completed: " + await ask(ctx, message, Enums)

    # Answers that ask for input first (SEP-2322, 2026-07-28)

    @server.tool()
    async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
        """Asks the caller's user for a name, then greets them."""
        answers = ctx.input_responses or {}
        if "user_name" in answers:
            return f"Hello, {field(answers['user_name'], 'name', 'stranger')}!"
        return InputRequiredResult(input_requests={"user_name": question("What is your name?")})

    @server.tool()
    async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
        """Asks the caller's model a question, then repeats its answer."""
        answers = ctx.input_responses or {}
        if "capital_question" in answers:
            said = answers["capital_question"]
            content = said.content if isinstance(said, CreateMessageResult) else None
            return f"Model said: {content.text if content is not None and content.type == 'text' else '?'}"
        return InputRequiredResult(
            input_requests={"capital_question": completion("What is the capital of France?", 100)}
        )

    @server.tool()
    async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
        """Asks the caller for its roots, then counts them."""
        answers = ctx.input_responses or {}
        if "client_roots" in answers:
            roots = answers["client_roots"]
            return f"Client exposed {len(roots.roots) if isinstance(roots, ListRootsResult) else 0} root(s)."
        return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})

    @server.tool()
    async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
        """Asks for a confirmation with a state that must come back unchanged."""
        if "confirm" in (ctx.input_responses or {}) and ctx.request_state == "request-state-nonce":
            return "state-ok: confirmation received"
        return InputRequiredResult(input_requests={"confirm": confirmation()}, request_state="request-state-nonce")

    @server.tool()
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
        """Asks for a form, a completion and the roots at once."""
        wanted = {"user_name", "greeting", "client_roots"}
        if wanted <= (ctx.input_responses or {}).keys():
            return "All inputs received."
        requests = {
            "user_name": question("What is your name?"),
            "greeting": completion("Generate a greeting", 50),
            "client_roots": ListRootsRequest(),
        }
        return InputRequiredResult(input_requests=requests, request_state="multiple-inputs")

    @server.tool()
    async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
        """Asks a name, then a colour, carrying the name in its state; answers with both."""
        state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
        answers = ctx.input_responses or {}
        if state["round"] == 1 and "step1" in answers:
            return InputRequiredResult(
                input_requests={"step2": question("Step 2: What is your favorite color?", "color")},
                request_state=json.dumps({"round": 2, "name": field(answers["step1"], "name")}),
            )
        if state["round"] == 2 and "step2" in answers:
            return f"{state.get('name')} likes {field(answers['step2'], 'color')}."
        # The first round, or an answer out of order: start again.
        return InputRequiredResult(
            input_requests={"step1": question("Step 1: What is your name?")},
            request_state=json.dumps({"round": 1}),
        )

    @server.tool()
    async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
        """Asks for a confirmation; the SDK refuses a state that comes back altered."""
        if ctx.request_state is None:
            return InputRequiredResult(input_requests={"confirm": confirmation()}, request_state="round-1")
        return f"state-ok: {ctx.request_state}"

    @server.tool()
    async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
        """Asks only for what the client said it can answer."""
        capabilities = ctx.client_capabilities
        requests = {}
        if capabilities is None or capabilities.sampling is not None:
            requests["sample"] = completion("Say hello", 50)
        if capabilities is None or capabilities.elicitation is not None:
            requests["ask"] = question("What is your name?")
        return InputRequiredResult(input_requests=requests, request_state="capability-gated")

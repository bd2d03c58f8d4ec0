"""A stand-in for the providers' public hosts while the docs' code blocks run.

Each host is answered by a ``WireFake`` of its own wire format whose default responder acts
like a cooperative model: offered tools and no tool result yet, it calls the first tool with
arguments made from the tool's JSON schema; otherwise it answers with a short text.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import respx

from treadle import AssistantMessage, TextContent, ToolCall
from treadle.testing import AzureFake, RecordedRequest, WireFake

_IDS = itertools.count(1)
_SAMPLES = {"integer": 2, "number": 2.5, "boolean": True, "string": "example"}


def _sample(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "string")
    if kind == "array":
        return [_sample(schema.get("items", {}))]
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _sample(sub) for name, sub in props.items()}
    return _SAMPLES.get(kind if isinstance(kind, str) else "string", "example")


def _tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for spec in body.get("tools") or []:
        fn = spec.get("function", spec)  # OpenAI nests it; Anthropic does not
        schema = fn.get("parameters") or fn.get("input_schema") or {}
        found.append((fn["name"], schema))
    return found


def _answered_a_tool(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    for message in messages:
        if message.get("role") == "tool":
            return True
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            return True
    return False


def respond(request: RecordedRequest) -> AssistantMessage:
    body = request.json if isinstance(request.json, dict) else {}
    tools = _tools(body)
    if tools and not _answered_a_tool(body):
        # an output tool (structured output) wins: it is how such a run ends
        name, schema = next(((n, s) for n, s in tools if "result" in n), tools[0])
        call = ToolCall(id=f"call_{next(_IDS)}", name=name, arguments=_sample(schema))
        return AssistantMessage(content=[call])
    return AssistantMessage(content=[TextContent(text="The answer is 5.")])


def docs_router(router: respx.MockRouter) -> None:
    """Route the public provider hosts to wire fakes on ``router``."""
    fakes = {
        "api.openai.com": WireFake.openai(default=respond),
        "api.anthropic.com": WireFake.anthropic(default=respond),
        "bedrock-runtime.us-east-1.amazonaws.com": WireFake.bedrock(default=respond),
    }
    # Azure OpenAI (docs/cloud.md): its addresses and the key the docs' environment sets
    azure = {"deployments": None, "api_key": "docs-test-key", "default": respond}
    routes = [
        ({"host": "my-resource.openai.azure.com", "path__regex": r"/responses$"},
         AzureFake.responses(**azure)),
        ({"host": "my-resource.openai.azure.com"}, AzureFake.chat(**azure)),
    ]  # fmt: skip
    routes += [({"host": host}, fake) for host, fake in fakes.items()]
    for where, fake in routes:

        async def answer(request: httpx.Request, fake: Any = fake) -> httpx.Response:
            response: httpx.Response = await fake.handle_async_request(request)
            return response

        router.route(**where).mock(side_effect=answer)
    router.route(host="127.0.0.1").pass_through()  # a page's own server (testing.serve)

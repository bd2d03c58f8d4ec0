"""A small MCP server for the tests, on the official SDK's server side (``MCPServer``).

    python mcp_server.py stdio
    python mcp_server.py http PORT        # streamable HTTP on 127.0.0.1:PORT/mcp
    python mcp_server.py sse PORT         # the older HTTP+SSE transport on 127.0.0.1:PORT/sse
    python mcp_server.py http-auth PORT TOKEN   # streamable HTTP wanting `Bearer TOKEN`

Tools: add, echo, fail (an isError result), slow (sleeps), picture (an image), doc (an
embedded resource), weather (structured content), grow (adds a tool, then says the list
changed), crash (the process dies mid-call), pid (its process id), headers (what the
request carried), whoami (the client's name, version and capabilities), profile (an
elicitation with defaults), rotate (http-auth: the token in use stops working; the next one
is TOKEN-2, then TOKEN-3 ...).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import BlobResourceContents, EmbeddedResource, ImageContent, TextResourceContents
from pydantic import BaseModel

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)

server = MCPServer("treadle-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def fail(reason: str = "it broke") -> str:
    """Always fails."""
    raise ToolError(reason)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    marker = os.environ.get("TREADLE_MCP_MARKER")
    if marker:
        with open(marker, "a") as f:  # noqa: ASYNC230
            f.write("started\n")
    try:
        await anyio.sleep(seconds)
    except BaseException:
        if marker:
            with open(marker, "a") as f:  # noqa: ASYNC230
                f.write("cancelled\n")
        raise
    return f"slept {seconds}"


@server.tool()
def picture() -> list[ImageContent]:
    """A one-pixel PNG."""
    return [ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")]


@server.tool()
def doc() -> list[EmbeddedResource]:
    """An embedded text resource and a blob."""
    text = TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="the notes")
    blob = BlobResourceContents(
        uri="file:///logo.png", mime_type="image/png", blob=base64.b64encode(PNG).decode()
    )
    return [
        EmbeddedResource(type="resource", resource=text),
        EmbeddedResource(type="resource", resource=blob),
    ]


@server.tool(structured_output=True)
def weather(city: str) -> dict[str, object]:
    """The weather, as structured content."""
    return {"city": city, "celsius": 21}


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool 'extra' and tells the client the list changed."""

    def extra() -> str:
        """Added at run time."""
        return "extra!"

    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
def crash() -> str:
    """The server process dies mid-call."""
    os._exit(3)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def headers(ctx: Context) -> str:
    """The Authorization header the request carried, echoed back (a hostile server)."""
    got = ctx.headers or {}
    return f"you sent: {got.get('authorization', '(none)')}"


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model to summarise the text (MCP sampling)."""
    from mcp.types import SamplingMessage
    from mcp.types import TextContent as Text

    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=Text(type="text", text=text))],
        max_tokens=50,
        system_prompt="Summarise in three words.",
    )
    return f"summary: {result.content.text} (by {result.model})"


class Confirmation(BaseModel):
    ok: bool


@server.tool()
async def confirm(ctx: Context) -> str:
    """Asks the user to confirm (MCP elicitation)."""
    answer = await ctx.elicit("Delete everything?", Confirmation)
    data = getattr(answer, "data", None)
    return f"{answer.action}: {data.ok if data is not None else None}"


@server.tool()
def whoami(ctx: Context) -> str:
    """The client's name, version and capabilities, as it announced them."""
    params = ctx.session.client_params
    capabilities = ctx.session.client_capabilities
    return json.dumps(
        {
            "name": params.client_info.name if params else None,
            "version": params.client_info.version if params else None,
            "capabilities": capabilities.model_dump(mode="json", exclude_none=True)
            if capabilities
            else {},
        }
    )


@server.tool()
async def profile(ctx: Context) -> str:
    """Asks for a profile whose fields have defaults; answers with the raw content."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "email": {"type": "string"},
        },
    }
    answer = await ctx.session.elicit_form("Your profile?", schema)
    return json.dumps({"action": answer.action, "content": answer.content})


TOKENS: dict[str, Any] = {"valid": "", "count": 1}


@server.tool()
def rotate() -> str:
    """The bearer token in use stops working; the next one is TOKEN-<n>."""
    TOKENS["count"] += 1
    TOKENS["valid"] = f"{TOKENS['base']}-{TOKENS['count']}"
    return "rotated"


def bearer_only(app: Any) -> Any:
    """The app, answering 401 to a request without the current bearer token."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization", b"").decode() != f"Bearer {TOKENS['valid']}":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain"),
                            (b"www-authenticate", b'Bearer error="invalid_token"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"bad or expired token"})
                return
        await app(scope, receive, send)

    return guarded


@server.resource("file:///readme.txt", description="A readme.")
def readme() -> str:
    return "read me"


@server.prompt(description="Say hello.")
def greet(name: str) -> str:
    return f"Hello, {name}!"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[2])))
    elif sys.argv[1:2] == ["http-auth"]:
        import uvicorn

        TOKENS["base"] = TOKENS["valid"] = sys.argv[3]
        app = bearer_only(server.streamable_http_app())
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    elif sys.argv[1:2] == ["sse"]:
        anyio.run(lambda: server.run_sse_async(host="127.0.0.1", port=int(sys.argv[2])))
    else:
        server.run("stdio")

"""AWS Bedrock through its Converse and ConverseStream APIs: one adapter for every model
family on Bedrock (docs/cloud.md#aws-bedrock)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import httpx
from pydantic_core import from_json, to_json

from .._redact import redact_url
from ..cancellation import CancellationToken
from ..errors import ConfigurationError
from ..types.content import FileContent, ImageContent, ThinkingContent, ToolCall
from ..types.messages import AgentMessage, AssistantMessage, ToolResultMessage
from ._aws import BEARER_VARIABLE, AWSSigV4, bedrock_endpoint, env_endpoint, env_region
from ._convert import (
    assistant_parts,
    each_message,
    merge_extra,
    safe_tool_call_id,
    unwrap_schema,
    user_parts,
)
from ._http import HTTPAdapter, HTTPOptions, env_key
from .anthropic import DEFAULT_THINKING_BUDGETS
from .base import ModelRequest, StreamEvent
from .bedrock_cache import cache_block, place
from .bedrock_stream import BedrockResponse, bedrock_error, error_type
from .files import BEDROCK, DOCUMENT_FORMATS, FileSupport, check_files, file_as_text

if TYPE_CHECKING:
    from typing_extensions import Unpack

Family = Literal["anthropic", "nova", "openai", "other"]
_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif",
            "image/webp": "webp"}  # fmt: skip
# Converse allows letters, digits, single spaces, hyphens, parentheses and brackets in names.
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9\-()\[\] ]+| {2,}")
_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
_DEFAULT_MAX_TOKENS = 8192  # sent only with a thinking budget, which needs room above it


def model_family(model: str) -> Family:
    """Which reasoning settings a model id (or inference profile, or its ARN) takes."""
    lowered = model.lower()
    if "anthropic." in lowered or "claude" in lowered:
        return "anthropic"
    if "amazon.nova" in lowered or "nova-" in lowered:
        return "nova"
    if "openai." in lowered or "gpt-oss" in lowered:
        return "openai"
    return "other"


class Bedrock(HTTPAdapter):
    """Every model on AWS Bedrock through Converse / ConverseStream (options:
    docs/cloud.md#aws-bedrock). Credentials, first found wins: ``auth=``; ``api_key=`` or
    ``AWS_BEARER_TOKEN_BEDROCK`` (a Bedrock API key, sent as a bearer token); else SigV4
    from botocore's credential chain (``profile=`` names a shared profile)."""

    name = "bedrock"
    key_header = ("authorization", "Bearer ")
    file_support: FileSupport = BEDROCK
    """The files this adapter sends (docs/files.md); replace it on an instance to widen it."""

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        profile: str | None = None,
        max_tokens: int | None = None,
        thinking_budgets: Mapping[str, int] | None = None,
        family: Family | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        settings: dict[str, Any] = dict(options)
        auth = settings.pop("auth", None)
        key = settings.pop("api_key", None)
        region = region or env_region()
        if auth is None and not key and profile is None:
            key = env_key(BEARER_VARIABLE)  # a Bedrock API key wins over SigV4, as in boto3
        if auth is None and not key:
            auth = AWSSigV4(region=region, profile=profile)  # needs botocore
            region = auth.region  # maybe the profile's
        base_url = settings.pop("base_url", None) or env_endpoint()
        if not base_url:
            if not region:
                raise ConfigurationError(
                    f"Bedrock needs a region: set AWS_REGION (or AWS_DEFAULT_REGION), pass "
                    f"region=, or give the endpoint ('bedrock:{model}@https://…' or base_url=)"
                )
            base_url = bedrock_endpoint(region)
        if key and not _private(base_url):
            raise ConfigurationError(
                f"a Bedrock API key travels only over HTTPS (or to this machine), not to "
                f"{redact_url(base_url)!r}: use an https:// endpoint"
            )
        super().__init__(model, api_key=key, base_url=base_url, auth=auth, **settings)
        self.region = region
        self.max_tokens = max_tokens
        self.thinking_budgets = {**DEFAULT_THINKING_BUDGETS, **(thinking_budgets or {})}
        self.family = family

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, region={self.region!r})"

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        model = request.model or self.model
        body = self.build_body(request)
        state = BedrockResponse(self.name, model)
        state.merge = request.coalesce_deltas
        action = "converse-stream" if self.streaming else "converse"
        url = f"{self.base_url}/model/{quote(model, safe='')}/{action}"
        return self._events(state, url, body, cancel)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Converse request body for ``request`` (pure: no I/O). The model goes in the URL."""
        model = request.model or self.model
        family = self.family or model_family(model)
        check_files(self.file_support, request.messages, self.name, model)
        point = cache_block(request, family)
        messages = _convert_messages(request.messages, self.name, point)
        body: dict[str, Any] = {"messages": messages}
        if request.system_prompt:
            body["system"] = [{"text": request.system_prompt}]
        tools = _tool_config(request, messages, point)
        if tools:
            body["toolConfig"] = tools
        inference: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        max_tokens = request.max_tokens or self.max_tokens
        forced = "any" in tools.get("toolChoice", {}) or "tool" in tools.get("toolChoice", {})
        level = request.thinking_level
        thinking = level != "off" and family == "anthropic" and not forced
        if thinking and _thinking_allowed(messages):
            budget = max(1024, self.thinking_budgets[level])
            max_tokens = max_tokens or _DEFAULT_MAX_TOKENS
            if max_tokens <= budget:
                max_tokens += budget
            extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
        else:  # Claude takes no temperature or top_p while thinking
            _put(inference, "temperature", request.temperature)
            _put(inference, "topP", request.top_p)
        if level != "off" and family == "nova":
            extra["reasoningConfig"] = {"type": "enabled", "maxReasoningEffort": _EFFORT[level]}
        elif level != "off" and family == "openai":
            extra["reasoning_effort"] = _EFFORT[level]
        _put(inference, "maxTokens", max_tokens)
        if request.stop:
            inference["stopSequences"] = list(request.stop)
        if inference:
            body["inferenceConfig"] = inference
        if extra:
            body["additionalModelRequestFields"] = extra
        if request.response_format is not None:
            body["outputConfig"] = {"textFormat": _text_format(request.response_format)}
        place(body, request, family)
        return merge_extra(body, request.extra_body)

    def _http_error(self, response: httpx.Response, raw: bytes) -> Any:
        try:
            payload: Any = from_json(raw) if raw else None
        except ValueError:
            payload = None
        name = error_type(response.headers.get("x-amzn-errortype", ""))
        if not name and isinstance(payload, dict):  # some proxies put it in the body
            name = error_type(str(payload.get("__type") or payload.get("code") or ""))
        status = response.status_code
        fallback = raw.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"
        return bedrock_error(
            name, payload, status=status, provider=self.name, headers=response.headers,
            fallback=fallback,
        )  # fmt: skip


def _private(url: str) -> bool:
    """Whether a bearer key may go to ``url``: HTTPS, or plain HTTP to this machine (a local
    proxy, a test server), as botocore sends one only over TLS."""
    parsed = httpx.URL(url)
    return parsed.scheme == "https" or parsed.host in ("localhost", "127.0.0.1", "::1")


def _put(target: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        target[name] = value


def _text_format(response_format: dict[str, Any]) -> dict[str, Any]:
    schema = unwrap_schema(response_format)
    inner = response_format.get("json_schema")
    named = inner if isinstance(inner, dict) else response_format
    definition: dict[str, Any] = {"schema": to_json(schema).decode()}
    if isinstance(named.get("name"), str):
        definition["name"] = named["name"]
    return {"type": "json_schema", "structure": {"jsonSchema": definition}}


def _tool_config(
    request: ModelRequest, messages: list[dict[str, Any]], point: dict[str, Any] | None
) -> dict[str, Any]:
    """``toolConfig``: the tools, and the choice ("none" has no Converse form: the tools stay
    offered). Bedrock refuses tool blocks in a history without a toolConfig, so tools the
    history used and the request no longer offers are declared with an open schema."""
    specs: list[dict[str, Any]] = []
    for spec in request.tools:
        specs.append(_tool(spec.name, spec.description, spec.parameters))
        if spec.cache_point and point is not None:
            specs.append(dict(point))
    offered = {spec.name for spec in request.tools}
    used = [
        block["toolUse"]["name"]
        for turn in messages
        for block in turn["content"]
        if "toolUse" in block
    ]
    for name in dict.fromkeys(used):
        if name not in offered:
            specs.append(_tool(name, "(no longer offered)", {"type": "object"}))
    if not specs:
        return {}
    config: dict[str, Any] = {"tools": specs}
    choice = request.tool_choice
    if request.tools and choice is not None and choice != "none":
        if isinstance(choice, dict):
            config["toolChoice"] = {"tool": {"name": choice["name"]}}
        elif choice in ("auto", "required", "any"):
            config["toolChoice"] = {"auto": {}} if choice == "auto" else {"any": {}}
        else:
            config["toolChoice"] = {"tool": {"name": choice}}
    return config


def _tool(name: str, description: str | None, schema: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name}
    if description:
        spec["description"] = description
    spec["inputSchema"] = {"json": schema}
    return {"toolSpec": spec}


def _text(text: str) -> dict[str, Any]:
    return {"text": text}


def _image(image: ImageContent) -> dict[str, Any]:
    fmt = _FORMATS.get(image.mime_type.lower())
    if fmt is None:
        raise ConfigurationError(
            f"Bedrock takes PNG, JPEG, GIF or WebP images, not {image.mime_type!r}: convert "
            "the image first"
        )
    return {"image": {"format": fmt, "source": {"bytes": image.data}}}


def _file(file: FileContent) -> dict[str, Any]:
    """A document block (Converse's formats), an image or video block, or text as text."""
    fmt = DOCUMENT_FORMATS.get(file.mime_type)
    if fmt is not None:
        name = _NOT_IN_NAME.sub("-", (file.name or "document").rsplit(".", 1)[0]).strip()
        document = {"format": fmt, "name": name or "document", "source": {"bytes": file.data}}
        return {"document": document}
    if file.kind == "text":
        return _text(file_as_text(file))
    major, minor = file.mime_type.split("/", 1)
    fmt = {"jpg": "jpeg", "quicktime": "mov"}.get(minor, minor)
    return {major: {"format": fmt, "source": {"bytes": file.data}}}


def _reasoning(block: ThinkingContent) -> dict[str, Any] | None:
    """Bedrock's own reasoning goes back with its signature (None: it has none)."""
    if not block.signature:
        return None
    if block.redacted:
        return {"reasoningContent": {"redactedContent": block.signature}}
    text = {"text": block.thinking, "signature": block.signature}
    return {"reasoningContent": {"reasoningText": text}}


def _tool_use(call: ToolCall) -> dict[str, Any]:
    use = {"toolUseId": safe_tool_call_id(call.id), "name": call.name, "input": call.arguments}
    return {"toolUse": use}


def _tool_result(message: ToolResultMessage) -> list[dict[str, Any]]:
    content = user_parts(message.content, _text, _image, _file) or [_text("(no output)")]
    result: dict[str, Any] = {"toolUseId": safe_tool_call_id(message.tool_call_id)}
    result["content"] = content
    if message.is_error:
        result["status"] = "error"
    return [{"toolResult": result}]


def _assistant(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    return assistant_parts(message, provider, text=_text, thinking=_reasoning, call=_tool_use)


def _convert_messages(
    messages: list[AgentMessage], provider: str, point: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The history as alternating turns, merged by role, tool results first in a turn; a
    message's explicit cache point (with caching on) follows its last block."""

    def marked(message: Any, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*blocks, dict(point)] if blocks and point and message.cache_point else blocks

    wire: list[dict[str, Any]] = []
    turns = each_message(
        messages,
        user=lambda m: ("user", marked(m, user_parts(m.content, _text, _image, _file))),
        assistant=lambda m: ("assistant", marked(m, _assistant(m, provider))),
        tool=lambda m: ("user", marked(m, _tool_result(m))),
    )
    for role, blocks in turns:
        if not blocks:
            continue
        if not wire or wire[-1]["role"] != role:
            wire.append({"role": role, "content": blocks})
            continue
        content: list[dict[str, Any]] = wire[-1]["content"]
        at = len(content)
        for block in blocks:
            if "toolResult" in block:  # ahead of the turn's other content
                at = next((i for i, b in enumerate(content) if _not_result(b)), len(content))
            elif "cachePoint" not in block:  # a point stays right after what it marks
                at = len(content)
            content.insert(at, block)
            at += 1
    return wire


def _not_result(block: dict[str, Any]) -> bool:
    """A block a tool result goes before: not a result, nor the cache point after one."""
    return "toolResult" not in block and "cachePoint" not in block


def _thinking_allowed(wire: list[dict[str, Any]]) -> bool:
    """False when the turn in progress, a tool-use turn answered only by tool results, does not
    open with reasoning (Claude refuses thinking then, as on Anthropic's own API)."""
    if wire and wire[-1]["role"] == "user":
        if not all("toolResult" in b or "cachePoint" in b for b in wire[-1]["content"]):
            return True
        wire = wire[:-1]
    blocks = wire[-1]["content"] if wire else []
    if not any("toolUse" in block for block in blocks):
        return True
    return "reasoningContent" in blocks[0]

"""Google Gemini (Generative Language API): ``models/{model}:streamGenerateContent``.

Thought signatures. Gemini attaches an opaque ``thoughtSignature`` to a response part (a
text part, a thought part or a ``functionCall``) and wants it back on that same part when the
history returns. treadle's content blocks have no per-part signature field, so a signature
travels as a *carrier*: an empty :class:`ThinkingContent` (``thinking=""``) holding the
signature, placed immediately before the block of the part it came on. When the history is
sent back to Gemini, a carrier's signature is put on the next part (or, with nothing after it,
on an empty text part). Carriers survive JSON round trips of the history and are dropped, like
every signature, when the history goes to another provider.

Streams. With ``alt=sse`` Gemini sends one ``GenerateContentResponse`` per SSE event
(separated by ``\\r\\n\\r\\n``). Without it (some proxies ignore the parameter) the body is one
JSON array whose elements arrive incrementally; the adapter recognises that format from the
first byte and splits the array as it streams. A function call always arrives whole in one
part, so its arguments are reported as a single :class:`ToolCallDelta`. Only the first
candidate is read; parts treadle has no block for (``executableCode``, ``inlineData`` …)
are skipped.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from typing import Any

import httpx
from pydantic_core import to_json

from ..cancellation import CancellationToken
from ..types import (
    AgentMessage,
    AssistantMessage,
    ErrorInfo,
    ImageContent,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from ..types.usage import StopReason
from ._convert import safe_tool_call_id, same_origin, thinking_as_text
from ._http import HTTPAdapter, classify, env_key
from ._sse import SSEDecoder
from .base import (
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingLevel,
    ThinkingStart,
)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
_SAMPLING_FIELDS = (
    ("top_p", "topP"),
    ("seed", "seed"),
    ("stop", "stopSequences"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
)
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

# Google's documented placeholder for a function call whose real signature is unknown (a
# history made by another provider); Gemini 3 rejects unsigned calls otherwise.
SKIP_SIGNATURE = "skip_thought_signature_validator"

_VERSIONED = re.compile(r"/v\d+(?:alpha|beta)?\d*$")
_GENERATION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")

# finishReason as a name or, with enum-encoding=int, as its proto number.
_FINISH_NAMES = {
    0: "FINISH_REASON_UNSPECIFIED",
    1: "STOP",
    2: "MAX_TOKENS",
    3: "SAFETY",
    4: "RECITATION",
    5: "OTHER",
    6: "BLOCKLIST",
    7: "PROHIBITED_CONTENT",
    8: "SPII",
    9: "MALFORMED_FUNCTION_CALL",
}
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "LANGUAGE",
    }
)
_BUDGETS = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}

# Keys of Gemini's Schema dialect (an OpenAPI 3.0 subset); everything else is dropped.
_SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "anyOf",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
        "propertyOrdering",
    }
)
_FORMATS = {
    "string": {"enum", "date-time"},
    "integer": {"int32", "int64"},
    "number": {"float", "double"},
}


class Gemini(HTTPAdapter):
    """Google's Gemini API. The key (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``) is sent in the
    ``x-goog-api-key`` header, never in the URL."""

    name = "gemini"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = True,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url or DEFAULT_BASE_URL,
            api_key=api_key or env_key(*KEY_VARIABLES),
            headers=headers,
            client=client,
            timeout=timeout,
        )
        self.streaming = stream

    def _headers(self) -> dict[str, str]:
        headers = super()._headers()
        if self._api_key:
            headers["x-goog-api-key"] = self._api_key
        return headers

    def url(self, model: str, *, stream: bool) -> str:
        """The endpoint for ``model``; ``models/`` is added unless the name has a collection."""
        path = model if "/" in model else f"models/{model}"
        root = self.base_url if _VERSIONED.search(self.base_url) else f"{self.base_url}/v1beta"
        if stream:
            return f"{root}/{path}:streamGenerateContent?alt=sse"
        return f"{root}/{path}:generateContent"

    # ---- request ----

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        model = request.model or self.model
        body: dict[str, Any] = {"contents": _contents(request.messages, model)}
        if request.system_prompt:
            body["systemInstruction"] = {"parts": [{"text": request.system_prompt}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        tool_config = _tool_config(request.tool_choice)
        if tool_config is not None:
            body["toolConfig"] = tool_config
        config: dict[str, Any] = {}
        if request.max_tokens is not None:
            config["maxOutputTokens"] = request.max_tokens
        if request.temperature is not None:
            config["temperature"] = request.temperature
        for field, name in _SAMPLING_FIELDS:
            value = getattr(request, field)
            if value is not None:
                config[name] = value
        thinking = thinking_config(model, request.thinking_level)
        if thinking is not None:
            config["thinkingConfig"] = thinking
        if request.response_format is not None:
            config["responseMimeType"] = "application/json"
            config["responseSchema"] = sanitize_schema(_unwrap_schema(request.response_format))
        if config:
            body["generationConfig"] = config
        return _merge(body, request.extra_body)

    # ---- response ----

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        if not self._api_key:
            raise ProviderError(
                "auth",
                "no Gemini API key: set the GEMINI_API_KEY (or GOOGLE_API_KEY) environment "
                "variable or pass api_key=",
                provider=self.name,
            )
        if cancel is not None and cancel.immediate:
            raise ProviderError("cancelled", "cancelled by the caller", provider=self.name)
        model = request.model or self.model
        body = self.build_body(request)
        state = _Response(model)
        if self.streaming:
            values = self._json_stream(self.url(model, stream=True), body, cancel, _ChunkDecoder())
            async with aclosing(values) as chunks:
                async for chunk in chunks:
                    for event in state.feed(chunk):
                        yield event
        else:
            payload = await self._post_json(self.url(model, stream=False), body)
            for chunk in payload if isinstance(payload, list) else [payload]:
                for event in state.feed(chunk):
                    yield event
        if state.finish is None:
            raise ProviderError(
                "truncated_stream",
                "the Gemini stream ended before a candidate reported its finishReason",
                provider=self.name,
            )
        for event in state.close():
            yield event
        yield StreamDone(message=state.message())

    def _http_error(self, response: httpx.Response, raw: bytes) -> ProviderError:
        error = super()._http_error(response, raw)
        # An invalid key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
        if error.kind == "bad_request" and b"API_KEY_INVALID" in raw:
            error.kind = "auth"
        return error


# ---- request helpers ----


def thinking_config(model: str, level: ThinkingLevel) -> dict[str, Any] | None:
    """``generationConfig.thinkingConfig`` for ``level`` on ``model``.

    Gemini 3 takes ``thinkingLevel`` (Pro knows only low/high; thinking cannot be switched
    off, so "off" asks for the least there is). Gemini 2.5 takes a token budget; only its
    Flash models can turn thinking off. Older models do not think and get nothing for "off".
    """
    found = _GENERATION.search(model)
    version = (int(found.group(1)), int(found.group(2) or 0)) if found else None
    flash = "flash" in model
    if version is not None and version >= (3, 0):
        if level == "off":
            return {"thinkingLevel": "minimal" if flash else "low"}
        name: str = level
        if not flash:
            name = {"minimal": "low", "medium": "high"}.get(level, level)
        return {"thinkingLevel": name, "includeThoughts": True}
    if level == "off":
        if version is not None and version >= (2, 5) and flash:
            return {"thinkingBudget": 0}
        return None
    return {"thinkingBudget": _BUDGETS[level], "includeThoughts": True}


def _tool_config(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, dict):
        name = choice.get("name")
        if not isinstance(name, str):
            raise ValueError(f"tool_choice must name a tool, got {choice!r}")
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
    if choice not in modes:
        raise ValueError(f"tool_choice must be auto, none, required or {{'name': ...}}: {choice!r}")
    return {"functionCallingConfig": {"mode": modes[choice]}}


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = sanitize_schema(tool.parameters)
    # A declaration without parameters is how Gemini spells "takes no arguments".
    if parameters.get("properties") or parameters.get("type", "object") != "object":
        declaration["parameters"] = parameters
    return declaration


def _unwrap_schema(response_format: dict[str, Any]) -> dict[str, Any]:
    """Accept OpenAI's wrappers ({"type": "json_schema", "json_schema": {"schema": ...}})
    as well as a bare schema."""
    inner = response_format.get("json_schema")
    if isinstance(inner, dict):
        response_format = inner
    schema = response_format.get("schema")
    if isinstance(schema, dict) and "properties" not in response_format:
        return schema
    return response_format


def sanitize_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema rewritten into Gemini's dialect: ``$ref`` inlined from ``$defs`` /
    ``definitions``, nullable unions folded into ``nullable``, ``oneOf`` read as ``anyOf``,
    ``const`` as a one-value enum, and unsupported keys (``additionalProperties``, ``title``,
    ``default``, ``$schema`` …) dropped."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, dict):
            defs.update(found)
    return _clean(schema, defs, frozenset())


def _clean(
    node: Mapping[str, Any], defs: Mapping[str, Any], seen: frozenset[str]
) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        if not isinstance(target, dict) or name in seen:
            # Unknown or recursive: Gemini has no way to say it, an open object is closest.
            out: dict[str, Any] = {"type": "object"}
        else:
            out = _clean(target, defs, seen | {name})
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        return out

    node = dict(node)
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    all_of = node.pop("allOf", None)
    if isinstance(all_of, list):
        for part in all_of:
            if isinstance(part, dict):
                merged = _clean(part, defs, seen)
                for key, value in merged.items():
                    node.setdefault(key, value)
    if "const" in node and "enum" not in node:
        node["enum"] = [node["const"]]

    out = {}
    types = node.get("type")
    if isinstance(types, list):
        rest = [t for t in types if t != "null"]
        if len(rest) < len(types):
            out["nullable"] = True
        types = rest[0] if len(rest) == 1 else None
        if types is None and rest:
            out["anyOf"] = [{"type": t} for t in rest]
    if isinstance(types, str) and types != "null":
        out["type"] = types

    for key, value in node.items():
        if key not in _SCHEMA_KEYS or key == "type":
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {
                name: _clean(sub, defs, seen)
                for name, sub in value.items()
                if isinstance(sub, dict)
            }
        elif key == "items" and isinstance(value, dict):
            out[key] = _clean(value, defs, seen)
        elif key == "anyOf" and isinstance(value, list):
            options = [_clean(sub, defs, seen) for sub in value if isinstance(sub, dict)]
            if any(sub.get("type") == "null" and len(sub) == 1 for sub in value):
                out["nullable"] = True
            options = [o for o in options if o]
            if len(options) == 1:
                for sub_key, sub_value in options[0].items():
                    out.setdefault(sub_key, sub_value)
            elif options:
                out["anyOf"] = options
        elif key == "enum":
            # Gemini enums are strings only.
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                out["enum"] = value
                out.setdefault("type", "string")
        elif key == "format":
            if value in _FORMATS.get(str(out.get("type", node.get("type"))), ()):
                out[key] = value
        else:
            out[key] = value
    if "required" in out and isinstance(out.get("properties"), dict):
        out["required"] = [r for r in out["required"] if r in out["properties"]]
    return out


def _contents(messages: Iterable[AgentMessage], model: str) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []  # tool-result images, sent after the responses

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    def flush_images() -> None:
        if images:
            add("user", list(images))
            images.clear()

    for message in messages:
        if isinstance(message, ToolResultMessage):
            add("user", [_function_response(message)])
            found = [_image_part(b) for b in message.content if isinstance(b, ImageContent)]
            if found:
                label = f"Images returned by the {message.tool_name} tool:"
                images.extend([{"text": label}, *found])
            continue
        flush_images()
        if isinstance(message, UserMessage):
            add("user", [_user_part(block) for block in message.content if _has_data(block)])
        elif isinstance(message, AssistantMessage):
            add("model", _model_parts(message, model))
    flush_images()
    return contents


def _has_data(block: TextContent | ImageContent) -> bool:
    return not isinstance(block, TextContent) or bool(block.text)


def _user_part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"text": block.text}
    return _image_part(block)


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": image.mime_type, "data": image.data}}


def _function_response(message: ToolResultMessage) -> dict[str, Any]:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    if not text and any(isinstance(b, ImageContent) for b in message.content):
        text = "(see the images below)"
    return {
        "functionResponse": {
            "id": safe_tool_call_id(message.tool_call_id),
            "name": message.tool_name,
            "response": {"error": text} if message.is_error else {"result": text},
        }
    }


def _model_parts(message: AssistantMessage, model: str) -> list[dict[str, Any]]:
    native = same_origin(message, "gemini")
    needs_signature = _generation_at_least(model, 3)
    parts: list[dict[str, Any]] = []
    pending: str | None = None  # a carrier's signature, waiting for its part
    signed_call = False

    def emit(part: dict[str, Any], signature: str | None = None) -> None:
        nonlocal pending
        signature = signature or pending
        pending = None
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)

    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted:
                continue
            if not native:
                text = thinking_as_text(block)
                if text:
                    emit({"text": text})
            elif not block.thinking:
                if block.signature:
                    if pending:
                        emit({"text": ""})
                    pending = block.signature
            else:
                emit({"text": block.thinking, "thought": True}, block.signature)
        elif isinstance(block, TextContent):
            if block.text or (native and pending):
                emit({"text": block.text})
        elif isinstance(block, ToolCall):
            call = {
                "functionCall": {
                    "id": safe_tool_call_id(block.id),
                    "name": block.name,
                    "args": block.arguments,
                }
            }
            signature = pending if native else None
            if not signed_call and not signature and needs_signature:
                signature = SKIP_SIGNATURE
            signed_call = True
            pending = None
            emit(call, signature)
    if pending:
        emit({"text": ""})
    return parts


def _generation_at_least(model: str, major: int) -> bool:
    found = _GENERATION.search(model)
    return found is not None and int(found.group(1)) >= major


def _merge(body: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra_body`` merged last; a dict merges one level deep, so ``{"generationConfig":
    {"topK": 3}}`` adds to the config instead of replacing it."""
    for key, value in extra.items():
        current = body.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            body[key] = {**current, **value}
        else:
            body[key] = value
    return body


# ---- response helpers ----


class _ChunkDecoder:
    """Response chunks from either an SSE body or a streamed JSON array (decided by the
    first non-blank byte)."""

    def __init__(self) -> None:
        self._sse: SSEDecoder | None = None
        self._json: _JSONArrayDecoder | None = None
        self._head = b""

    def feed(self, data: bytes) -> list[Any]:
        if self._sse is None and self._json is None:
            self._head += data
            stripped = self._head.lstrip()
            if not stripped:
                return []
            data, self._head = self._head, b""
            if stripped[:1] in (b"[", b"{"):
                self._json = _JSONArrayDecoder()
            else:
                self._sse = SSEDecoder()
        if self._json is not None:
            return self._json.feed(data)
        assert self._sse is not None
        return [event.json() for event in self._sse.feed(data) if event.data.strip()]

    def close(self) -> list[Any]:
        if self._sse is not None:
            return [event.json() for event in self._sse.close() if event.data.strip()]
        return []


class _JSONArrayDecoder:
    """Yields each top-level object of a JSON array (or a lone object) as soon as its closing
    brace arrives. Works on bytes: every structural character is ASCII, and UTF-8 never
    reuses ASCII byte values inside a multi-byte character."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._pos = 0
        self._depth = 0
        self._start = -1
        self._in_string = False
        self._escaped = False
        self._array = False

    def feed(self, data: bytes) -> list[Any]:
        from pydantic_core import from_json

        buffer = self._buffer
        buffer += data
        found: list[Any] = []
        i = self._pos
        while i < len(buffer):
            char = buffer[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == 0x5C:  # backslash
                    self._escaped = True
                elif char == 0x22:  # quote
                    self._in_string = False
            elif char == 0x22:
                self._in_string = True
            elif char in (0x7B, 0x5B):  # { [
                if self._depth == 0 and char == 0x5B:
                    self._array = True
                elif self._depth == (1 if self._array else 0):
                    self._start = i
                self._depth += 1
            elif char in (0x7D, 0x5D):  # } ]
                self._depth -= 1
                if self._start >= 0 and self._depth == (1 if self._array else 0):
                    found.append(from_json(bytes(buffer[self._start : i + 1])))
                    self._start = -1
            i += 1
        keep = self._start if self._start >= 0 else i
        del buffer[:keep]
        self._pos = i - keep
        if self._start >= 0:
            self._start = 0
        return found


def _finish_name(value: Any) -> str:
    if isinstance(value, int):
        return _FINISH_NAMES.get(value, f"FINISH_REASON_{value}")
    return str(value)


class _Response:
    """Assembles one response from its chunks and produces the stream events on the way."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.response_id: str | None = None
        self.started = False
        self.finish: str | None = None
        self.finish_message: str | None = None
        self.blocked: str | None = None
        self.usage: dict[str, Any] = {}
        self.blocks: list[ThinkingContent | TextContent | ToolCall] = []
        self.texts: list[list[str]] = []  # text pieces per block
        self.open: str | None = None  # "text" / "thinking" while a block takes deltas
        self.calls = 0
        self._id_base = uuid.uuid4().hex[:16]  # for call ids when there is no response id

    def feed(self, chunk: Any) -> list[StreamEvent]:
        if not isinstance(chunk, dict):
            return []
        if "error" in chunk:
            error = chunk["error"]
            status = error.get("code") if isinstance(error, dict) else None
            raise classify(status if isinstance(status, int) else 0, chunk, provider="gemini")
        events: list[StreamEvent] = []
        if isinstance(chunk.get("responseId"), str):
            self.response_id = chunk["responseId"]
        if isinstance(chunk.get("modelVersion"), str):
            self.model = chunk["modelVersion"]
        if not self.started:
            self.started = True
            events.append(StreamStart(model=self.model, response_id=self.response_id))
        if isinstance(chunk.get("usageMetadata"), dict):
            self.usage = chunk["usageMetadata"]
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.blocked = str(feedback["blockReason"])
            self.finish = self.finish or self.blocked
        candidates = chunk.get("candidates") or []
        candidate = next(
            (c for c in candidates if isinstance(c, dict) and c.get("index", 0) == 0), None
        )
        if not isinstance(candidate, dict):
            return events
        content = candidate.get("content") or {}
        for part in content.get("parts") or []:
            if isinstance(part, dict):
                self._part(part, events)
        reason = candidate.get("finishReason")
        if reason not in (None, 0, "FINISH_REASON_UNSPECIFIED"):
            self.finish = _finish_name(reason)
            if isinstance(candidate.get("finishMessage"), str):
                self.finish_message = candidate["finishMessage"]
        return events

    def _part(self, part: dict[str, Any], events: list[StreamEvent]) -> None:
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        text = part.get("text")
        if isinstance(signature, str) and signature:
            events.extend(self.close())
            index = self._add(ThinkingContent(thinking="", signature=signature))
            events.append(ThinkingStart(index=index))
            events.append(ThinkingEnd(index=index, signature=signature))
        if isinstance(call, dict):
            events.extend(self.close())
            self.calls += 1
            args = call.get("args")
            arguments = args if isinstance(args, dict) else {}
            tool_call = ToolCall(
                id=self._call_id(call), name=str(call.get("name", "")), arguments=arguments
            )
            index = self._add(tool_call)
            events.append(ToolCallStart(index=index, id=tool_call.id, name=tool_call.name))
            events.append(ToolCallDelta(index=index, arguments=to_json(arguments).decode()))
            events.append(ToolCallEnd(index=index, tool_call=tool_call))
        elif isinstance(text, str) and text:
            kind = "thinking" if part.get("thought") else "text"
            if self.open != kind:
                events.extend(self.close())
                if kind == "thinking":
                    index = self._add(ThinkingContent(thinking=""))
                    events.append(ThinkingStart(index=index))
                else:
                    index = self._add(TextContent(text=""))
                    events.append(TextStart(index=index))
                self.open = kind
            index = len(self.blocks) - 1
            self.texts[index].append(text)
            if kind == "thinking":
                events.append(ThinkingDelta(index=index, text=text))
            else:
                events.append(TextDelta(index=index, text=text))

    def _add(self, block: ThinkingContent | TextContent | ToolCall) -> int:
        self.blocks.append(block)
        self.texts.append([])
        return len(self.blocks) - 1

    def _call_id(self, call: dict[str, Any]) -> str:
        given = call.get("id")
        if isinstance(given, str) and given:
            return given
        # Gemini gives no call ids: derive one from the response id, unique per call.
        return safe_tool_call_id(f"call_{self.response_id or self._id_base}_{self.calls - 1}")

    def close(self) -> list[StreamEvent]:
        """End the open text or thinking block, if any."""
        if self.open is None:
            return []
        index = len(self.blocks) - 1
        kind, self.open = self.open, None
        if kind == "thinking":
            return [ThinkingEnd(index=index)]
        return [TextEnd(index=index)]

    def message(self) -> AssistantMessage:
        content: list[ThinkingContent | TextContent | ToolCall] = []
        for block, pieces in zip(self.blocks, self.texts, strict=True):
            if isinstance(block, TextContent):
                block = TextContent(text="".join(pieces))
            elif isinstance(block, ThinkingContent) and pieces:
                block = ThinkingContent(thinking="".join(pieces), signature=block.signature)
            content.append(block)
        stop, error = self._stop_reason(any(isinstance(b, ToolCall) for b in content))
        return AssistantMessage(
            content=content,
            stop_reason=stop,
            model=self.model,
            provider="gemini",
            usage=_usage(self.usage),
            response_id=self.response_id,
            error=error,
        )

    def _stop_reason(self, has_calls: bool) -> tuple[StopReason, ErrorInfo | None]:
        if self.blocked is not None:
            return "error", ErrorInfo(
                kind="content_filter", message=f"Gemini blocked the prompt: {self.blocked}"
            )
        if self.finish == "STOP":
            return ("tool_use" if has_calls else "stop"), None
        if self.finish == "MAX_TOKENS":
            return "length", None
        kind = "content_filter" if self.finish in _FILTERED else "model_error"
        detail = f": {self.finish_message}" if self.finish_message else ""
        return "error", ErrorInfo(kind=kind, message=f"Gemini stopped with {self.finish}{detail}")


def _usage(meta: Mapping[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = meta.get(key)
        return value if isinstance(value, int) else 0

    prompt = count("promptTokenCount")
    cached = count("cachedContentTokenCount")
    tool_prompt = count("toolUsePromptTokenCount")
    thoughts = count("thoughtsTokenCount")
    output = count("candidatesTokenCount") + thoughts
    total = count("totalTokenCount") or prompt + tool_prompt + output
    return Usage(
        input=max(0, prompt - cached) + tool_prompt,
        output=output,
        reasoning=thoughts,
        cache_read=cached,
        total_tokens=total,
    )

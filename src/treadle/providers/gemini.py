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
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import httpx

from ..cancellation import CancellationToken
from ..errors import ConfigurationError
from ..types import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from ._convert import (
    after_tool_runs,
    merge_extra,
    put_settings,
    safe_tool_call_id,
    same_origin,
    text_of,
    thinking_as_text,
    unwrap_schema,
    user_parts,
)
from ._http import HTTPAdapter
from .base import ModelRequest, ProviderError, StreamEvent, ThinkingLevel
from .gemini_stream import Response

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
# The request's settings under generationConfig's names.
_CONFIG = {
    "max_tokens": "maxOutputTokens",
    "temperature": "temperature",
    "top_p": "topP",
    "seed": "seed",
    "stop": "stopSequences",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_Turn = tuple[str, list[dict[str, Any]]]

# Google's documented placeholder for a function call whose real signature is unknown (a
# history made by another provider); Gemini 3 rejects unsigned calls otherwise.
SKIP_SIGNATURE = "skip_thought_signature_validator"

_VERSIONED = re.compile(r"/v\d+(?:alpha|beta)?\d*$")
_GENERATION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")

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
    default_base_url = DEFAULT_BASE_URL
    key_variables = KEY_VARIABLES

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
        put_settings(config, request, _CONFIG)
        thinking = thinking_config(model, request.thinking_level)
        if thinking is not None:
            config["thinkingConfig"] = thinking
        if request.response_format is not None:
            config["responseMimeType"] = "application/json"
            config["responseSchema"] = sanitize_schema(unwrap_schema(request.response_format))
        if config:
            body["generationConfig"] = config
        return merge_extra(body, request.extra_body)

    # ---- response ----

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        if not self._api_key:
            raise self._no_key("no Gemini API key", "GEMINI_API_KEY (or GOOGLE_API_KEY)")
        model = request.model or self.model
        url = self.url(model, stream=self.streaming)
        return self._events(Response(self.name, model), url, self.build_body(request), cancel)

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
            raise ConfigurationError(f"tool_choice must name a tool, got {choice!r}")
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
    if choice not in modes:
        raise ConfigurationError(
            f"tool_choice must be auto, none, required or {{'name': ...}}: {choice!r}"
        )
    return {"functionCallingConfig": {"mode": modes[choice]}}


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = sanitize_schema(tool.parameters)
    # A declaration without parameters is how Gemini spells "takes no arguments".
    if parameters.get("properties") or parameters.get("type", "object") != "object":
        declaration["parameters"] = parameters
    return declaration


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
    def entry(message: AgentMessage) -> tuple[_Turn | None, list[dict[str, Any]], bool]:
        if isinstance(message, ToolResultMessage):
            return ("user", [_function_response(message)]), _tool_images(message), True
        if isinstance(message, UserMessage):
            return ("user", user_parts(message.content, _text_part, _image_part)), [], False
        if isinstance(message, AssistantMessage):
            return ("model", _model_parts(message, model)), [], False
        return None, [], False

    # Tool-result images are sent in a user turn after the function responses.
    turns = after_tool_runs(map(entry, messages), lambda images: ("user", images))
    contents: list[dict[str, Any]] = []
    for role, parts in turns:
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def _tool_images(message: ToolResultMessage) -> list[dict[str, Any]]:
    found = [_image_part(b) for b in message.content if isinstance(b, ImageContent)]
    if not found:
        return []
    return [{"text": f"Images returned by the {message.tool_name} tool:"}, *found]


def _text_part(text: str) -> dict[str, Any]:
    return {"text": text}


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": image.mime_type, "data": image.data}}


def _function_response(message: ToolResultMessage) -> dict[str, Any]:
    text = text_of(message.content)
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

"""Google Gemini (Generative Language API) adapter (docs/providers.md#gemini)."""

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
    FileContent,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from ._convert import (
    PENALTIES,
    after_tool_runs,
    merge_extra,
    put_settings,
    safe_tool_call_id,
    thinking_as_text,
    unwrap_schema,
    user_parts,
    wire_names,
)
from ._http import HTTPAdapter
from .base import ModelRequest, ProviderError, StreamEvent, ThinkingLevel
from .files import GEMINI, FileSupport, check_files, file_as_text, text_of
from .gemini_stream import Response

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
KEY_VARIABLES: tuple[str, ...] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_KEY_HEADER: tuple[str, str] | None = ("x-goog-api-key", "")  # (None on Vertex: no key)
# The request's settings under generationConfig's names.
_CONFIG = wire_names(PENALTIES, max_tokens="maxOutputTokens", top_p="topP", stop="stopSequences")
_CONFIG.update(presence_penalty="presencePenalty", frequency_penalty="frequencyPenalty")
# Google's documented placeholder for a function call whose real signature is unknown (a
# history made by another provider); Gemini 3 rejects unsigned calls otherwise.
SKIP_SIGNATURE = "skip_thought_signature_validator"
_VERSIONED = re.compile(r"/v\d+(?:alpha|beta)?\d*$")
_GENERATION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")
_BUDGETS = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
# Keys of Gemini's Schema dialect (an OpenAPI 3.0 subset); everything else is dropped.
_SCHEMA_KEYS = frozenset(
    "type format description nullable enum items properties required anyOf minItems maxItems"
    " minimum maximum minLength maxLength pattern minProperties maxProperties"
    " propertyOrdering".split()
)
_FORMATS = dict(
    string={"enum", "date-time"}, integer={"int32", "int64"}, number={"float", "double"}
)
_Turn = tuple[str, list[dict[str, Any]]]


class Gemini(HTTPAdapter):
    """Google's Gemini API. The key (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``) is sent in the
    ``x-goog-api-key`` header, never in the URL."""

    name = "gemini"
    default_base_url = DEFAULT_BASE_URL
    file_support: FileSupport = GEMINI
    """The files this adapter sends (docs/files.md); replace it on an instance to widen it."""
    key_variables = KEY_VARIABLES
    key_header = _KEY_HEADER

    def url(self, model: str, *, stream: bool) -> str:
        """The endpoint for ``model``; ``models/`` is added unless the name has a collection."""
        path = model if "/" in model else f"models/{model}"
        root = self.base_url if _VERSIONED.search(self.base_url) else f"{self.base_url}/v1beta"
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{root}/{path}:{method}"

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        model = request.model or self.model
        check_files(self.file_support, request.messages, self.name, model)
        body: dict[str, Any] = {"contents": _contents(request.messages, model, self.name)}
        if request.system_prompt:
            body["systemInstruction"] = {"parts": [{"text": request.system_prompt}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        if request.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": _calling(request.tool_choice)}
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

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        if not self.has_credentials:
            raise self._no_key("no Gemini API key", "GEMINI_API_KEY (or GOOGLE_API_KEY)")
        model = request.model or self.model
        url = self.url(model, stream=self.streaming)
        state = Response(self.name, model)
        state.merge = request.coalesce_deltas
        return self._events(state, url, self.build_body(request), cancel)

    def _http_error(self, response: httpx.Response, raw: bytes) -> ProviderError:
        error = super()._http_error(response, raw)
        # An invalid key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
        if error.kind == "bad_request" and b"API_KEY_INVALID" in raw:
            error.kind = "auth"
        return error


def _generation(model: str) -> tuple[int, int]:
    """``(3, 0)`` for ``gemini-3-pro``, ``(2, 5)`` for ``gemini-2.5-flash``; (0, 0) for others."""
    found = _GENERATION.search(model)
    return (int(found.group(1)), int(found.group(2) or 0)) if found else (0, 0)


def thinking_config(model: str, level: ThinkingLevel) -> dict[str, Any] | None:
    """``generationConfig.thinkingConfig`` for ``level`` on ``model`` (docs/providers.md#gemini)."""
    version = _generation(model)
    flash = "flash" in model
    if version >= (3, 0):
        if level == "off":
            return {"thinkingLevel": "minimal" if flash else "low"}
        name = level if flash else {"minimal": "low", "medium": "high"}.get(level, level)
        return {"thinkingLevel": name, "includeThoughts": True}
    if level == "off":
        return {"thinkingBudget": 0} if flash and version >= (2, 5) else None
    return {"thinkingBudget": _BUDGETS[level], "includeThoughts": True}


def _calling(choice: str | dict[str, Any]) -> dict[str, Any]:
    """``functionCallingConfig`` for a tool choice."""
    if isinstance(choice, dict):
        name = choice.get("name")
        if not isinstance(name, str):
            raise ConfigurationError(f"tool_choice must name a tool, got {choice!r}")
        return {"mode": "ANY", "allowedFunctionNames": [name]}
    if choice not in _MODES:
        message = f"tool_choice must be auto, none, required or {{'name': ...}}: {choice!r}"
        raise ConfigurationError(message)
    return {"mode": _MODES[choice]}


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = sanitize_schema(tool.parameters)
    # A declaration without parameters is how Gemini spells "takes no arguments".
    if parameters.get("properties") or parameters.get("type", "object") != "object":
        declaration["parameters"] = parameters
    return declaration


def sanitize_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema rewritten into Gemini's dialect (docs/providers.md#gemini)."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update(schema[key])
    return _clean(schema, defs, frozenset())


def _clean(
    node: Mapping[str, Any], defs: Mapping[str, Any], seen: frozenset[str]
) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        if isinstance(target, dict) and name not in seen:
            out: dict[str, Any] = _clean(target, defs, seen | {name})
        else:  # unknown or recursive: Gemini cannot say it, an open object is closest
            out = {"type": "object"}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        return out
    node = dict(node)
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    all_of = node.pop("allOf", None)
    for part in all_of if isinstance(all_of, list) else ():
        if isinstance(part, dict):
            for key, value in _clean(part, defs, seen).items():
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
            out[key] = {k: _clean(v, defs, seen) for k, v in value.items() if isinstance(v, dict)}
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
        elif key == "enum":  # Gemini enums are strings only
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


def _contents(
    messages: Iterable[AgentMessage], model: str, provider: str = "gemini"
) -> list[dict[str, Any]]:
    def entry(message: AgentMessage) -> tuple[_Turn | None, list[dict[str, Any]], bool]:
        if isinstance(message, ToolResultMessage):
            images = [
                _image_part(b) if isinstance(b, ImageContent) else _file_part(b)
                for b in message.content
                if isinstance(b, ImageContent) or (isinstance(b, FileContent) and not _inline(b))
            ]
            texts = [t for t in map(text_of, message.content) if t is not None]
            text = "\n".join(texts) or ("(see the images below)" if images else "")
            response = {"error": text} if message.is_error else {"result": text}
            call_id = safe_tool_call_id(message.tool_call_id)
            answer = {"id": call_id, "name": message.tool_name, "response": response}
            if images:
                images.insert(0, {"text": f"Images returned by the {message.tool_name} tool:"})
            return ("user", [{"functionResponse": answer}]), images, True
        if isinstance(message, UserMessage):
            parts = user_parts(
                message.content, lambda text: {"text": text}, _image_part, _file_part
            )
            return ("user", parts), [], False
        if isinstance(message, AssistantMessage):
            return ("model", _model_parts(message, model, provider)), [], False
        return None, [], False

    # Tool-result images are sent in a user turn after the function responses.
    turns = after_tool_runs(map(entry, messages), lambda images: ("user", images))
    contents: list[dict[str, Any]] = []
    for role, parts in turns:
        if parts and contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        elif parts:
            contents.append({"role": role, "parts": parts})
    return contents


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": image.mime_type, "data": image.data}}


def _inline(block: object) -> bool:
    """A text file with its bytes: sent as text."""
    return isinstance(block, FileContent) and block.kind == "text" and block.data is not None


def _file_part(file: FileContent) -> dict[str, Any]:
    """Text as text, bytes as ``inlineData``, a URL or file URI as ``fileData``."""
    if _inline(file):
        return {"text": file_as_text(file)}
    if file.data is not None:
        return {"inlineData": {"mimeType": file.mime_type, "data": file.data}}
    return {"fileData": {"mimeType": file.mime_type, "fileUri": file.url or file.file_id}}


def _model_parts(message: AssistantMessage, model: str, provider: str) -> list[dict[str, Any]]:
    """A model turn's parts, thought signatures placed as docs/providers.md#gemini says."""
    native = message.provider == provider  # signatures go back only where they came from
    unsigned = _generation(model) >= (3, 0)  # the first call still needs a signature
    parts: list[dict[str, Any]] = []
    pending: str | None = None  # a carrier's signature, waiting for its part

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
            elif block.thinking:
                emit({"text": block.thinking, "thought": True}, block.signature)
            elif block.signature:
                if pending:
                    emit({"text": ""})
                pending = block.signature
        elif isinstance(block, TextContent):
            if block.text or pending:  # (a signature is pending only in Gemini's own turn)
                emit({"text": block.text})
        elif isinstance(block, ToolCall):
            call = {"id": safe_tool_call_id(block.id), "name": block.name, "args": block.arguments}
            emit({"functionCall": call}, pending or (SKIP_SIGNATURE if unsigned else None))
            unsigned = False
    if pending:
        emit({"text": ""})
    return parts

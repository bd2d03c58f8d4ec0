"""What an OpenAI client sends, read as treadle's history: Chat Completions ``messages``,
Responses ``input`` items, the client's function tools (treadle's external tools) and the
sampling settings. Anything else is a :class:`~treadle.ui.RequestError` saying what was
wrong, answered in OpenAI's error shape."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..loop import Allow, Deny, ModelSettings, Suspension
from ..tools import ExternalTool
from ..types import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._gate import Decision
from ._guard import load_json
from ._runs import RequestError

_SETTINGS: TypeAdapter[ModelSettings] = TypeAdapter(ModelSettings)


def bad(message: str, status: int = 400) -> RequestError:
    return RequestError(message, status)


def _text_parts(content: Any, where: str) -> list[Any]:
    """A message's ``content`` (a string, or a list of parts) as treadle blocks: text, and
    images given as ``data:`` URLs."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextContent(text=content)] if content else []
    if not isinstance(content, list):
        raise bad(f"{where}: content must be a string or a list of parts")
    blocks: list[Any] = []
    for part in content:
        if not isinstance(part, dict):
            raise bad(f"{where}: each content part is an object with a type")
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text", "refusal"):
            text = part.get("text", part.get("refusal", ""))
            if not isinstance(text, str):
                raise bad(f"{where}: a {kind} part's text must be a string")
            if text:
                blocks.append(TextContent(text=text))
        elif kind in ("image_url", "input_image"):
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            blocks.append(_image(url, where))
        else:
            raise bad(
                f"{where}: content parts of type {kind!r} are not supported (text and images "
                "as data: URLs are)"
            )
    return blocks


def _image(url: Any, where: str) -> ImageContent:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise bad(f"{where}: an image must be a data: URL (data:image/png;base64,...)")
    head, _, data = url.partition(";base64,")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise bad(f"{where}: the image's base64 data is not valid") from None
    mime = head.removeprefix("data:") or "image/png"
    if not mime.startswith("image/"):
        raise bad(f"{where}: {mime!r} is not an image type")
    return ImageContent(data=data, mime_type=mime)


def _arguments(text: Any, where: str) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        raise bad(f"{where}: arguments must be a JSON object in a string")
    try:
        value = load_json((text or "{}").encode())
    except ValueError as exc:
        raise bad(f"{where}: arguments: {exc}") from None
    if not isinstance(value, dict):
        raise bad(f"{where}: arguments must be a JSON object")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise bad(f"{where} must be a non-empty string")
    return value


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):  # a list of content parts
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return "" if output is None else str(output)


# ---- Chat Completions ----


def messages_from_chat(messages: Any) -> tuple[list[AgentMessage], str]:
    """Chat Completions ``messages`` as treadle's history, and the text of their
    ``system`` / ``developer`` messages (joined to the agent's system prompt)."""
    if not isinstance(messages, list) or not messages:
        raise bad("messages must be a non-empty list")
    history: list[AgentMessage] = []
    system: list[str] = []
    names: dict[str, str] = {}
    for n, raw in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(raw, dict):
            raise bad(f"{where} must be an object with a role")
        role = raw.get("role")
        if role in ("system", "developer"):
            system.append("".join(b.text for b in _text_parts(raw.get("content"), where)))
        elif role == "user":
            history.append(UserMessage(content=_text_parts(raw.get("content"), where)))
        elif role == "assistant":
            blocks: list[Any] = [
                b for b in _text_parts(raw.get("content"), where) if isinstance(b, TextContent)
            ]
            calls = raw.get("tool_calls") or []
            if not isinstance(calls, list):
                raise bad(f"{where}: tool_calls must be a list")
            for k, call in enumerate(calls):
                place = f"{where}.tool_calls[{k}]"
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict):
                    raise bad(f"{place} must be {{id, type: 'function', function: {{...}}}}")
                call_id = _string(call.get("id"), f"{place}.id")
                name = _string(fn.get("name"), f"{place}.function.name")
                names[call_id] = name
                arguments = _arguments(fn.get("arguments"), place)
                blocks.append(ToolCall(id=call_id, name=name, arguments=arguments))
            history.append(AssistantMessage(content=blocks))
        elif role == "tool":
            call_id = _string(raw.get("tool_call_id"), f"{where}.tool_call_id")
            text = _output_text(raw.get("content"))
            history.append(
                ToolResultMessage(
                    tool_call_id=call_id, tool_name=names.get(call_id, ""), content=text
                )
            )
        else:
            raise bad(
                f"{where}: role {role!r} is not one of system, developer, user, assistant, tool"
            )
    return history, "\n\n".join(s for s in system if s)


def chat_tools(tools: Any) -> list[ExternalTool]:
    """The client's ``tools`` (``{type: "function", function: {name, description,
    parameters}}``) as external tools: the run stops on their calls for the client."""
    found: list[ExternalTool] = []
    for n, spec in enumerate(_list(tools, "tools")):
        fn = spec.get("function") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or spec.get("type", "function") != "function" or not fn:
            raise bad(f"tools[{n}]: only function tools are supported")
        found.append(_external(fn, f"tools[{n}].function"))
    return found


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad(f"{where} must be a list")
    return value


def _external(fn: Mapping[str, Any], where: str) -> ExternalTool:
    name = _string(fn.get("name"), f"{where}.name")
    parameters = fn.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise bad(f"{where}.parameters must be a JSON schema object")
    return ExternalTool(name, str(fn.get("description") or ""), parameters)


def model_settings(body: Mapping[str, Any], *, max_tokens: Sequence[str]) -> ModelSettings:
    """The request's sampling settings (those the client gave), checked as the agent checks
    its own; ``max_tokens`` names the request fields that mean it."""
    given: dict[str, Any] = {}
    for name in ("temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty"):
        if body.get(name) is not None:
            given[name] = body[name]
    for name in max_tokens:
        if body.get(name) is not None:
            given["max_tokens"] = body[name]
    try:
        return _SETTINGS.validate_python(given)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise bad(f"invalid sampling settings: {problems}") from None


# ---- Responses ----

ApprovalRecord = tuple[str, Suspension]
"""What an approval request id stands for: the call id and the call as the server judged
it."""


class ResponsesInput:
    """A Responses request's ``input`` read as history: ``function_call`` / ``mcp_call`` /
    ``mcp_approval_request`` items join the assistant message before them; an
    ``mcp_approval_response`` is a decision on the call its request names, valid only for
    approval requests this server made (``approvals``)."""

    def __init__(self, approvals: Mapping[str, ApprovalRecord]) -> None:
        self.approvals = approvals
        self.history: list[AgentMessage] = []
        self.system: list[str] = []
        self.decisions: dict[str, Decision] = {}
        self.waiting: dict[str, Suspension] = {}
        self.used: list[str] = []  # approval request ids answered here
        self._blocks: list[Any] = []
        self._results: list[ToolResultMessage] = []

    def read(self, value: Any) -> ResponsesInput:
        if isinstance(value, str):
            self.history.append(UserMessage(content=[TextContent(text=value)]))
            return self
        for n, item in enumerate(_list(value, "input")):
            if not isinstance(item, dict):
                raise bad(f"input[{n}] must be an object")
            self._item(item, f"input[{n}]")
        self._flush()
        return self

    def _flush(self) -> None:
        if self._blocks:
            self.history.append(AssistantMessage(content=list(self._blocks)))
        self.history.extend(self._results)
        self._blocks.clear()
        self._results.clear()

    def _has_calls(self) -> bool:
        return any(isinstance(b, ToolCall) for b in self._blocks)

    def _item(self, item: dict[str, Any], where: str) -> None:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role == "assistant":
                if self._has_calls():
                    self._flush()
                self._blocks.extend(_text_parts(item.get("content"), where))
                return
            self._flush()
            if role in ("system", "developer"):
                self.system.append("".join(b.text for b in _text_parts(item.get("content"), where)))
            elif role == "user":
                self.history.append(UserMessage(content=_text_parts(item.get("content"), where)))
            else:
                raise bad(
                    f"{where}: role {role!r} is not one of user, assistant, system, developer"
                )
        elif kind == "function_call":
            call_id = _string(item.get("call_id"), f"{where}.call_id")
            name = _string(item.get("name"), f"{where}.name")
            arguments = _arguments(item.get("arguments"), where)
            self._blocks.append(ToolCall(id=call_id, name=name, arguments=arguments))
        elif kind == "function_call_output":
            call_id = _string(item.get("call_id"), f"{where}.call_id")
            name = next(
                (b.name for b in self._blocks if isinstance(b, ToolCall) and b.id == call_id), ""
            )
            self._flush()
            self.history.append(
                ToolResultMessage(
                    tool_call_id=call_id, tool_name=name, content=_output_text(item.get("output"))
                )
            )
        elif kind == "mcp_call":  # a call the server ran: the call and its result, as data
            call_id = _string(item.get("id"), f"{where}.id")
            name = _string(item.get("name"), f"{where}.name")
            self._blocks.append(
                ToolCall(id=call_id, name=name, arguments=_arguments(item.get("arguments"), where))
            )
            error = item.get("error")
            text = _output_text(item.get("output")) if not error else str(error)
            self._results.append(
                ToolResultMessage(
                    tool_call_id=call_id, tool_name=name, content=text, is_error=bool(error)
                )
            )
        elif kind == "mcp_approval_request":
            self._approval_request(item, where)
        elif kind == "mcp_approval_response":
            self._approval_response(item, where)
        elif kind in ("reasoning", "mcp_list_tools"):
            return  # the model's own summaries, tool listings: nothing to replay
        else:
            raise bad(
                f"{where}: input items of type {kind!r} are not supported (message, "
                "function_call, function_call_output, mcp_call, mcp_approval_request and "
                "mcp_approval_response are)"
            )

    def _approval_request(self, item: dict[str, Any], where: str) -> None:
        request_id = _string(item.get("id"), f"{where}.id")
        name = _string(item.get("name"), f"{where}.name")
        arguments = _arguments(item.get("arguments"), where)
        record = self.approvals.get(request_id)
        # an approval request this server did not make (or already saw answered) stays an
        # open call the server is not waiting on: the gate refuses it (409)
        call_id = record[0] if record is not None else request_id
        if record is not None:
            self.waiting[call_id] = record[1]
        self._blocks.append(ToolCall(id=call_id, name=name, arguments=arguments))

    def _approval_response(self, item: dict[str, Any], where: str) -> None:
        request_id = _string(item.get("approval_request_id"), f"{where}.approval_request_id")
        approve = item.get("approve")
        if not isinstance(approve, bool):
            raise bad(f"{where}.approve must be true or false")
        record = self.approvals.get(request_id)
        call_id = record[0] if record is not None else request_id
        reason = item.get("reason")
        self.decisions[call_id] = (
            Allow() if approve else Deny(str(reason or "The user denied this tool call."))
        )
        self.used.append(request_id)


def responses_tools(tools: Any) -> list[ExternalTool]:
    """The client's function tools (``{type: "function", name, description,
    parameters}``) as external tools; other kinds (web search, hosted MCP ...) are refused:
    the agent's own tools are the server's."""
    found: list[ExternalTool] = []
    for n, spec in enumerate(_list(tools, "tools")):
        if not isinstance(spec, dict) or spec.get("type") != "function":
            kind = spec.get("type") if isinstance(spec, dict) else None
            raise bad(f"tools[{n}]: tools of type {kind!r} are not supported (function tools are)")
        found.append(_external(spec, f"tools[{n}]"))
    return found

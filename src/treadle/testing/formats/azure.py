"""Azure OpenAI's dialect of Chat Completions: the content filter's verdicts in the stream
(the prompt's first, in a chunk of its own with no choice, id or model; each choice's on
its chunks) and its error bodies (a refused prompt, keys, tokens, deployments)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ...types import AssistantMessage
from .base import Context, Encoded, Format, dumps, sse
from .openai import OpenAIChatFormat
from .responses import ResponsesFormat

CATEGORIES = ("hate", "jailbreak", "self_harm", "sexual", "violence")

FILTER_POLICY = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy. Please modify your prompt and retry. To learn more about our content "
    "filtering policies please read our documentation: "
    "https://go.microsoft.com/fwlink/?linkid=2198766"
)


def filter_results(flagged: Iterable[str] = ()) -> dict[str, Any]:
    """A content filter's verdict per category, as Azure reports it."""
    marked = set(flagged)
    results: dict[str, Any] = {}
    for name in sorted(set(CATEGORIES) | marked):
        if name == "jailbreak":
            results[name] = {"filtered": name in marked, "detected": name in marked}
        else:
            severity = "high" if name in marked else "safe"
            results[name] = {"filtered": name in marked, "severity": severity}
    return results


def content_filter_error(flagged: Iterable[str] = ("jailbreak",)) -> dict[str, Any]:
    """The HTTP 400 body of a prompt Azure's content filter refused."""
    return {
        "error": {
            "message": FILTER_POLICY,
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": filter_results(flagged),
            },
        }
    }


def azure_error(status: int, code: str, message: str) -> dict[str, Any]:
    """Azure's own error body (authentication, routing), not OpenAI's shape."""
    return {"error": {"code": code, "message": message}}


class Deployed(Format):
    """Azure answers with the model a deployment runs (``gpt-4o-2024-11-20``), not the
    deployment's name: ``models`` maps one to the other."""

    models: dict[str, str]

    def model_of(self, url_path: str, body: Any) -> str:
        name = super().model_of(url_path, body)
        return self.models.get(name, name)


class AzureResponsesFormat(Deployed, ResponsesFormat):
    """The Responses API as Azure OpenAI serves it."""

    label = "Azure OpenAI Responses"

    def __init__(self, models: Mapping[str, str] | None = None) -> None:
        self.models = dict(models or {})


class AzureChatFormat(Deployed, OpenAIChatFormat):
    """Chat Completions as Azure OpenAI streams it. A message with ``stop_reason="error"``
    ends with ``finish_reason: "content_filter"``, the categories in ``flagged`` marked."""

    label = "Azure OpenAI Chat Completions"

    def __init__(
        self, flagged: Iterable[str] = ("violence",), models: Mapping[str, str] | None = None
    ) -> None:
        OpenAIChatFormat.__init__(self)
        self.flagged = tuple(flagged)
        self.models = dict(models or {})

    def extra_headers(self, ctx: Context) -> dict[str, str]:
        return {"apim-request-id": f"wirefake-{ctx.serial:06d}", "x-ms-region": "Sweden Central"}

    def _prompt_verdict(self) -> list[dict[str, Any]]:
        return [{"prompt_index": 0, "content_filter_results": filter_results()}]

    def stream(self, message: AssistantMessage, ctx: Context) -> Encoded:
        encoded = super().stream(message, ctx)
        first = {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": self._prompt_verdict(),
        }
        events = [sse(first), *(self._verdicts(e, message) for e in encoded.events)]
        tail = [self._verdicts(e, message) for e in encoded.tail]
        return Encoded(events, tail, encoded.content_type)

    def _verdicts(self, event: bytes, message: AssistantMessage) -> bytes:
        """A chunk with each choice's verdict (the flagged categories on a filtered finish)."""
        text = event.decode()
        if not text.startswith("data: {"):
            return event
        payload = json.loads(text[len("data: ") :])
        for choice in payload.get("choices") or []:
            filtered = choice.get("finish_reason") == "content_filter"
            choice["content_filter_results"] = (
                filter_results(self.flagged) if filtered else filter_results()
            )
        return sse(payload)

    def whole(self, message: AssistantMessage, ctx: Context) -> bytes:
        payload = json.loads(super().whole(message, ctx))
        payload["prompt_filter_results"] = self._prompt_verdict()
        for choice in payload["choices"]:
            filtered = choice.get("finish_reason") == "content_filter"
            choice["content_filter_results"] = filter_results(self.flagged if filtered else ())
        return dumps(payload).encode()

"""An LLM judge: another model grades the answer against a rubric, keeps its reasoning, and
its tokens and cost are counted apart from the agent's."""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import ConfigurationError
from ..loop import ModelSettings
from ..providers import Provider
from ..types import AssistantMessage, Usage
from .core import EvalContext, Evaluator, Score
from .jsonish import as_json

INSTRUCTIONS = """You grade an AI assistant's answer against a rubric.
Read the rubric, the conversation's input, the reference answer if one is given, and the
assistant's answer. Think it through, then reply with one JSON object and nothing else:
{"reasoning": "<why, in a few sentences>", "score": <from 0 to 1>, "pass": <true or false>}"""

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.M)


class Judge(Evaluator):
    """Grades a sample with its own model against ``rubric``.

    ``model`` is a model string or a :class:`~treadle.Provider` (a ``ScriptedProvider``
    plays a judge in tests). The judge is sent the rubric, the user's input, the case's
    ``expected_output`` as a reference (``reference=False`` leaves it out) and the answer,
    and replies with ``{"reasoning", "score", "pass"}``: the score is its ``score`` (0 to 1),
    it passes on its ``pass`` (without one: ``score >= threshold``), and its reasoning is
    the reason, with any thinking the model showed in ``details["thinking"]``. The judge's
    tokens and cost are the score's ``usage``, counted in reports apart from the agent's.
    An answer that is no such object fails the score with ``error=True``."""

    def __init__(
        self,
        rubric: str,
        *,
        model: str | Provider,
        threshold: float = 0.5,
        reference: bool = True,
        model_settings: ModelSettings | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(rubric, str) or not rubric.strip():
            raise ConfigurationError("Judge needs a rubric: what a good answer does, in words")
        if not 0.0 <= threshold <= 1.0:
            raise ConfigurationError(f"Judge threshold must be from 0 to 1, got {threshold!r}")
        self.rubric = rubric
        self.model = model
        self.threshold = threshold
        self.reference = reference
        self.model_settings = model_settings
        self.name = name or "judge"

    def __repr__(self) -> str:
        model = self.model if isinstance(self.model, str) else provider_label(self.model)
        return f"Judge({self.name!r}, model={model!r})"

    def prompt(self, ctx: EvalContext) -> str:
        """What the judge is sent about one sample."""
        parts = ["## Rubric", self.rubric.strip(), "", "## Input"]
        for i, turn in enumerate(ctx.inputs, start=1):
            text = turn if isinstance(turn, str) else getattr(turn, "text", str(turn))
            parts.append(f"(user, turn {i}) {text}" if len(ctx.inputs) > 1 else text)
        if self.reference and ctx.case.expected_output is not None:
            expected = ctx.case.expected_output
            shown = expected if isinstance(expected, str) else json.dumps(as_json(expected))
            parts += ["", "## Reference answer", shown]
        output = ctx.output
        answer = output if isinstance(output, str) else json.dumps(as_json(output))
        parts += ["", "## The assistant's answer", answer or "(no answer)"]
        return "\n".join(parts)

    async def evaluate(self, ctx: EvalContext) -> Score:
        from ..agent import Agent

        provider = ctx.resolve_model(self.model)
        judge: Agent[None] = Agent(
            provider,
            system_prompt=INSTRUCTIONS,
            model_settings=self.model_settings,
            hooks=ctx.hooks,
            name=self.name,
        )
        result = await judge.run(self.prompt(ctx))
        label = provider_label(provider)
        thinking = "\n".join(
            m.thinking for m in result.messages if isinstance(m, AssistantMessage)
        ).strip()
        if result.reason != "completed":
            error = f": {result.error.kind}: {result.error.message}" if result.error else ""
            return self._failed(f"the judge's run ended ({result.reason}{error})", result.usage)
        verdict = parse_verdict(result.text)
        if verdict is None:
            return self._failed(
                f"the judge's answer is no verdict: {result.text[:200]!r}", result.usage
            )
        value, passed, reasoning = verdict
        if passed is None:
            passed = value >= self.threshold
        details: dict[str, Any] = {"model": label, "verdict": result.text}
        if thinking:
            details["thinking"] = thinking
        return Score(
            name=self.label(),
            value=value,
            passed=passed,
            reason=reasoning,
            details=details,
            usage=result.usage,
        )

    def _failed(self, reason: str, usage: Usage) -> Score:
        return Score(
            name=self.label(), value=0.0, passed=False, reason=reason, usage=usage, error=True
        )


def provider_label(provider: Provider) -> str:
    """``name:model`` of a provider (its name alone when it has no model)."""
    model = getattr(provider, "model", None)
    return f"{provider.name}:{model}" if isinstance(model, str) and model else provider.name


def parse_verdict(text: str) -> tuple[float, bool | None, str] | None:
    """``(score, pass or None, reasoning)`` from a judge's answer: one JSON object, maybe
    in a code fence or after some words; None when there is none."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        data = json.loads(body[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    raw_score, raw_pass = data.get("score"), data.get("pass", data.get("passed"))
    if raw_pass is not None and not isinstance(raw_pass, bool):
        return None
    if isinstance(raw_score, bool) or not isinstance(raw_score, (int, float, type(None))):
        return None
    if raw_score is None:
        if raw_pass is None:
            return None
        raw_score = 1.0 if raw_pass else 0.0
    value = min(1.0, max(0.0, float(raw_score)))
    return value, raw_pass, str(data.get("reasoning") or data.get("reason") or "")

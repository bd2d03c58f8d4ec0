"""An Agent whose runs return a validated pydantic object (``output_type``).

The model answers through a final-result tool; a validation error goes back to the model,
which corrects itself (here the scripted model gets it wrong once).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pydantic import BaseModel

from treadle import Agent, AssistantMessage, ToolCall
from treadle.providers import Provider, get_provider
from treadle.testing import ScriptedProvider, ScriptItem


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


class Trip(BaseModel):
    city: str
    days: int
    highlights: list[str]


provider = model_or_script(
    [
        AssistantMessage(
            content=[ToolCall(id="f1", name="final_result", arguments={"city": "Porto"})]
        ),
        AssistantMessage(
            content=[
                ToolCall(
                    id="f2",
                    name="final_result",
                    arguments={"city": "Porto", "days": 3, "highlights": ["Ribeira", "Livraria"]},
                )
            ]
        ),
    ]
)
agent = Agent(provider, output_type=Trip, system_prompt="Plan short trips.")
result = agent.run_sync("Plan three days in Porto.")
if result.output is not None:
    print(result.reason, result.output)
else:  # a real model may fail to give a valid answer within the retries
    print("no valid trip:", result.reason, result.error)

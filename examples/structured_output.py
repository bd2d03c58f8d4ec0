"""An Agent whose runs return a validated pydantic object (``output_type``).

The model answers through a final-result tool; a validation error goes back to the model,
which corrects itself (here the scripted model gets it wrong once).
"""

from __future__ import annotations

from _model import model_or_script
from pydantic import BaseModel

from treadle import Agent, AssistantMessage, ToolCall


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

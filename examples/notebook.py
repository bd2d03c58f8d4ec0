# %% [markdown]
# # treadle in a notebook
# `run_sync` works in a plain script and inside a running event loop (a Jupyter cell),
# without nest_asyncio. Run the cells in order (VS Code / Jupytext understand `# %%`).

# %%
import os
from collections.abc import Sequence

from treadle import Agent, AssistantMessage, TextContent, ToolCall, tool
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


@tool(category="info")
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


agent = Agent(
    model_or_script(
        [
            AssistantMessage(
                content=[ToolCall(id="w1", name="word_count", arguments={"text": "to be or not"})]
            ),
            AssistantMessage(content=[TextContent(text="It has 4 words.")]),
            AssistantMessage(content=[TextContent(text="You asked how many words it has.")]),
        ]
    ),
    tools=[word_count],
)

# %%
result = agent.run_sync("How many words in 'to be or not'?")
for message in result.messages:
    print(f"{message.role:>12}: {getattr(message, 'text', '')}")

# %%
# The conversation goes on: the agent keeps its history between runs.
print(agent.run_sync("What did I ask you?").text)
print("usage so far:", agent.usage.total_tokens, "tokens")

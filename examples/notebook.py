# %% [markdown]
# # treadle in a notebook
# `run_sync` works in a plain script and inside a running event loop (a Jupyter cell),
# without nest_asyncio. Run the cells in order (VS Code / Jupytext understand `# %%`).

# %%
from _model import model_or_script

from treadle import Agent, AssistantMessage, TextContent, ToolCall, tool


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

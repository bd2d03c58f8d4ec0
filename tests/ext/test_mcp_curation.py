"""treadle.ext.mcp_curation: MCP tools trimmed to the most recently used, others kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.ext.mcp_curation import McpCuration, mcp_name
from treadle.testing import ScriptedProvider
from treadle.tools import FunctionTool


def mcp_tool(name: str) -> FunctionTool:
    def run() -> str:
        return f"{name} ran"

    return FunctionTool(run, name=name, description=f"{name}.", category="mcp")


@tool(category="info")
def local() -> str:
    """A built-in tool."""
    return "local"


NAMES = ["mcp__gh__issues", "mcp__gh__prs", "mcp__jira__search", "mcp__jira__create"]


def test_names() -> None:
    assert mcp_name("mcp__gh__issues") == ("gh", "issues")
    assert mcp_name("mcp__my_server__get__thing") == ("my_server", "get__thing")
    assert mcp_name("local") is None and mcp_name("mcp__x") is None


def test_ranking_by_recency_then_count(tmp_path: Path) -> None:
    curation = McpCuration(tmp_path / "audit.db", top_k=2)
    assert curation.keep([*NAMES, "local"]) == {"mcp__gh__issues", "mcp__gh__prs", "local"}
    curation.record("mcp__jira__create", at=10)
    curation.record("mcp__gh__prs", at=5)
    curation.record("mcp__gh__prs", at=4)
    curation.record("local", at=99)  # not MCP: not audited
    assert curation.ranking() == ["mcp__jira__create", "mcp__gh__prs"]
    assert curation.keep([*NAMES, "local"]) == {"mcp__jira__create", "mcp__gh__prs", "local"}
    # persisted: a new instance on the file ranks the same
    again = McpCuration(tmp_path / "audit.db", top_k=3)
    assert again.keep(NAMES) == {"mcp__jira__create", "mcp__gh__prs", "mcp__gh__issues"}
    assert McpCuration(top_k=0).keep([*NAMES, "local"]) == {"local"}
    with pytest.raises(ValueError):
        McpCuration(top_k=-1)


@pytest.mark.anyio
async def test_requests_are_trimmed_and_calls_audited() -> None:
    curation = McpCuration(top_k=1)
    call = ToolCall(id="1", name="mcp__jira__search", arguments={})
    provider = ScriptedProvider([AssistantMessage(content=[call]), "done"])
    tools = [local, *(mcp_tool(n) for n in NAMES)]
    agent = Agent(provider, tools=tools, hooks=[curation])
    result = await agent.run("find the ticket")
    assert result.reason == "completed"
    offered = [[t.name for t in r.tools] for r in provider.requests]
    assert offered[0] == ["local", "mcp__gh__issues"]  # nothing used yet: the first one
    assert offered[1] == ["local", "mcp__jira__search"]  # the call just made wins
    assert curation.ranking() == ["mcp__jira__search"]

"""The agent card: who the agent is, what it can do, where and how to call it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from ..errors import ConfigurationError
from ..tools import Tool, Toolset, traits_of

MODES = ["text/plain", "application/json"]
BEARER = "bearer"

SkillSpec = AgentSkill | Mapping[str, Any]


def skill(spec: SkillSpec) -> AgentSkill:
    """An :class:`AgentSkill` from one, or from a dict of its fields (``id``, ``name``,
    ``description``, ``tags``, ``examples``)."""
    if isinstance(spec, AgentSkill):
        return spec
    if not isinstance(spec, Mapping) or not spec.get("id") or not spec.get("name"):
        raise ConfigurationError(
            f"a skill is an a2a.types.AgentSkill or a dict with at least 'id' and 'name' "
            f"(and a 'description'), not {spec!r}"
        )
    fields = dict(spec)
    fields.setdefault("description", fields["name"])
    fields.setdefault("tags", [])
    try:
        return AgentSkill(**fields)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"skill {spec.get('id')!r}: {exc}") from None


def tool_skills(tools: Sequence[Any]) -> list[AgentSkill]:
    """One skill per tool the agent offers (toolsets are read when the card is served)."""
    skills = []
    for item in tools:
        if not isinstance(item, Tool) or isinstance(item, Toolset):
            continue
        tags = [traits_of(item).category.value]
        skills.append(
            AgentSkill(
                id=item.name,
                name=item.name,
                description=item.description or item.name,
                tags=tags,
            )
        )
    return skills


async def offered_tools(tools: Sequence[Any]) -> list[Any]:
    """The agent's tools, toolsets opened up (what its next run would offer)."""
    found: list[Any] = []
    for item in tools:
        if isinstance(item, Tool):
            found.append(item)
        elif isinstance(item, Toolset):
            found.extend(await item.get_tools())
    return found


def build_card(
    *,
    name: str,
    description: str,
    url: str,
    skills: Sequence[AgentSkill],
    version: str,
    token: bool,
) -> AgentCard:
    """The card: JSON-RPC over HTTP at ``url`` (A2A 1.0), streaming, no push
    notifications; ``token``: a Bearer token is required on every request."""
    card = AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=list(skills)
        or [AgentSkill(id="chat", name="chat", description=description, tags=["chat"])],
    )
    if token:
        card.security_schemes[BEARER].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="Authorization: Bearer <the server's token>"
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={BEARER: StringList()}))
    return card

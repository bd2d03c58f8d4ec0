"""docs/contract.md agrees with the code on the points issue 21 found it did not: every
``Hooks`` method is in the hook table of §3, and the ``rejected`` rule says what a run that
rejected steering after some turns returns (the messages those turns added)."""

from __future__ import annotations

import re
from pathlib import Path

from treadle import Hooks

CONTRACT = (Path(__file__).resolve().parents[2] / "docs" / "contract.md").read_text()


def _section(title: str) -> str:
    start = CONTRACT.index(title)
    end = CONTRACT.find("\n## ", start + len(title))
    return CONTRACT[start : end if end != -1 else None]


def test_every_hook_method_is_in_the_contracts_hook_table() -> None:
    table = _section("## 3. Hooks")
    listed = set(re.findall(r"^\| ([a-z_]+)\(", table, re.MULTILINE))
    listed |= set(re.findall(r" / ([a-z_]+)\(", table))  # before_compaction / after_compaction
    methods = {n for n in vars(Hooks) if not n.startswith("_") and callable(getattr(Hooks, n))}
    assert methods - listed == set(), f"hooks missing from contract §3: {methods - listed}"


def test_the_rejected_rule_covers_steering_rejected_after_turns() -> None:
    # The run that rejects steering after some turns ends with the messages those turns
    # added (what agent_loop returns): a rule saying messages=[] must be about prompts.
    for part in (_section("### 2.2"), _section("## 7. Invariants")):
        for item in re.split(r"\n(?=\| |\d+\. )", part):
            squeezed = item.replace("`", "").replace(" ", "").replace("\n", "")
            if "rejected" in item and ("messages=[]" in squeezed or "messages==[]" in squeezed):
                assert "prompts" in item.lower() and "steering" in item.lower(), (
                    f"the contract says a rejected run ends with messages=[]: {item.strip()!r}"
                )


def test_the_hook_table_gives_each_method_the_arguments_it_is_called_with() -> None:
    from treadle.loop._dispatch import SIGNATURES

    table = _section("## 3. Hooks")
    written = dict(re.findall(r"(?:^\| | / )([a-z_]+)\(([a-z_, ]*)\)", table, re.MULTILINE))
    for name, arguments in SIGNATURES.items():
        assert tuple(written[name].split(", ")) == arguments, (
            f"{name}({written[name]}) in the contract, {arguments} in the code"
        )

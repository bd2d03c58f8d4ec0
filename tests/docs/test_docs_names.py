"""Every class or function name the docs put in backticks can be imported from treadle.

A renamed or unexported public name fails here instead of in a reader's script. Names that
belong to Python or to a provider's wire format are listed in ``NOT_OURS``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PUBLIC = [
    "treadle",
    "treadle.a2a",
    "treadle.agent",
    "treadle.context",
    "treadle.durable",
    "treadle.errors",
    "treadle.evals",
    "treadle.ext",
    "treadle.ext.auto_skills",
    "treadle.ext.mcp_curation",
    "treadle.ext.memory",
    "treadle.ext.plan_mode",
    "treadle.ext.profiles",
    "treadle.ext.routing",
    "treadle.ext.skills",
    "treadle.ext.style",
    "treadle.ext.workflow",
    "treadle.ext.workers",
    "treadle.loop",
    "treadle.mcp",
    "treadle.otel",
    "treadle.providers",
    "treadle.sessions",
    "treadle.streaming",
    "treadle.testing",
    "treadle.simulation",
    "treadle.tools",
    "treadle.types",
    "treadle.ui",
    "treadle.ui.ag_ui",
    "treadle.ui.vercel_ai",
]
# Python's own names, values that providers send on the wire (finish reasons, enums), HTTP's
# (methods, headers, cookie attributes) and A2A's (methods, errors).
NOT_OURS = {
    "RuntimeWarning",
    "ANY", "AUTO", "BLOCKLIST", "Cancelled", "DIRECT", "End", "False", "LANGUAGE", "NONE",
    "NORMAL", "None", "OTHER", "Paris", "RECITATION", "REDACTED", "RetryInfo", "SAFETY",
    "SPII", "STOP", "True", "TypeError", "URL", "Update", "ValueError", "BaseModel",
    "KeyboardInterrupt", "SystemExit", "BaseException", "OSError", "Exception", "RuntimeError",
    "EventSource", "HttpAgent", "DefaultChatTransport", "PENDING", "ENQUEUED", "SUCCESS", "CUSTOM",
    "ERROR", "CANCELLED", "GET", "HEAD", "OPTIONS", "Host", "Origin", "HttpOnly", "Secure",
    # A2A's methods and errors, and the a2a-sdk's interface an executor implements
    "SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask",
    "SubscribeToTask", "TaskNotCancelable", "AgentExecutor", "CreateTaskPushNotificationConfig",
    "SendMessageConfiguration", "TaskNotFoundError", "TaskNotCancelableError",
    "UnsupportedOperationError", "PushNotificationNotSupportedError",
    "COMPLETED", "FAILED", "CANCELED", "REJECTED",  # task states, as the proto names them
    # AWS Bedrock's exceptions, as its API names them (docs/cloud.md)
    "AccessDeniedException", "ExpiredTokenException", "InternalServerException",
    "InvalidSignatureException", "MissingAuthenticationTokenException", "ModelErrorException",
    "ModelNotReadyException", "ModelStreamErrorException", "ModelTimeoutException",
    "ResourceNotFoundException", "ServiceQuotaExceededException", "ServiceUnavailableException",
    "ThrottlingException", "UnrecognizedClientException", "ValidationException",
    "AnthropicVertex", "Credentials", "RESOURCE_EXHAUSTED",  # anthropic's and google-auth's
}  # fmt: skip
NAME = re.compile(r"`([A-Z][A-Za-z0-9]+)(?:[.(\[][^`]*)?`")


CONTRIBUTOR_PAGES = {"architecture.md"}  # names internals on purpose


def named_in(pages: list[Path]) -> set[str]:
    names: set[str] = set()
    for page in pages:
        names.update(NAME.findall(page.read_text(encoding="utf-8")))
    return names - NOT_OURS


def test_every_name_the_docs_use_is_importable() -> None:
    modules = [importlib.import_module(name) for name in PUBLIC]
    user_pages = [p for p in PAGES if p.name not in CONTRIBUTOR_PAGES]
    missing = sorted(n for n in named_in(user_pages) if not any(hasattr(m, n) for m in modules))
    assert not missing, f"the docs name these, but no public module exports them: {missing}"


def test_the_architecture_page_names_modules_that_exist() -> None:
    import pkgutil

    import treadle

    every = [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(treadle.__path__, "treadle.")
        if not info.name.endswith("__main__")
    ]
    pages = [p for p in PAGES if p.name in CONTRIBUTOR_PAGES]
    missing = sorted(n for n in named_in(pages) if not any(hasattr(m, n) for m in every))
    assert not missing, f"docs/architecture.md names what the code no longer has: {missing}"
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for module in re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", text):
        assert (ROOT / "src" / "treadle" / module).exists() or (ROOT / module).exists(), module


@pytest.mark.parametrize("name", ["Agent", "RunResult", "RunFailed"])
def test_agent_names_are_exported_from_the_top(name: str) -> None:
    import treadle

    assert name in treadle.__all__
    assert getattr(treadle, name).__name__ == name


@pytest.mark.parametrize("name", ["AgentBusy", "AgentSnapshot", "AgentStream", "Profile"])
def test_other_agent_names_live_in_treadle_agent(name: str) -> None:
    import treadle.agent

    assert name in treadle.agent.__all__
    assert getattr(treadle.agent, name).__name__ == name


def test_every_file_in_the_module_map_exists() -> None:
    """Each ``.py`` and folder a row of the architecture page's module map names exists:
    under ``src/treadle``, under the row's own folder (``loop/sink.py``'s row may name
    ``_watcher.py``), or under a folder the row names (``web/`` ... ``_app.py``)."""
    src = ROOT / "src" / "treadle"
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for row in (line for line in text.splitlines() if line.startswith("| `")):
        names = re.findall(r"`([\w/]+\.py|[\w]+/)`", row)
        folders = {src}
        first = re.findall(r"`([^`]+)`", row.split("|")[1])
        if first and "/" in first[0]:
            folders.add(src / first[0].rstrip("/").rpartition("/")[0])
            folders.add(src / first[0].rstrip("/"))
        folders |= {f / n for f in list(folders) for n in names if n.endswith("/")}
        for name in names:
            if not any((folder / name).exists() for folder in folders):
                missing.append(f"{name} (in the row of {first[0] if first else '?'})")
    assert not missing, (
        f"docs/architecture.md's module map names files that do not exist: {missing}"
    )

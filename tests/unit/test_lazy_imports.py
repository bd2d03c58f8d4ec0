"""``import treadle`` imports none of the optional integrations or their dependencies, and
no event-loop backend (asyncio alone costs it about 25 ms; a backend loads when a run starts)."""

from __future__ import annotations

import subprocess
import sys


def test_import_treadle_stays_light() -> None:
    code = (
        "import sys, treadle, treadle.agent, treadle.loop, treadle.tools, treadle.providers\n"
        "import treadle.providers.vertex, treadle.providers.fallback, treadle.testing\n"
        "heavy = ('treadle.ext', 'treadle.ui', 'treadle.durable', 'treadle.mcp', 'treadle.otel',"
        " 'treadle.a2a', 'treadle.evals', 'dbos', 'sqlalchemy', 'mcp', 'opentelemetry',"
        " 'starlette', 'uvicorn', 'ag_ui', 'a2a', 'google', 'yaml', 'jsonschema', 'asyncio',"
        " 'trio', 'botocore', 'boto3', 'cryptography', 'anthropic')\n"
        "print(sorted({m.split('.')[0] if not m.startswith('treadle') else m"
        " for m in sys.modules if m.startswith(heavy)}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_import_treadle_evals_leaves_its_extras_for_later() -> None:
    """``import treadle.evals`` (and the CLI) imports neither PyYAML nor jsonschema (a
    YAML dataset and a JSON Schema dict import them when used), nor OpenTelemetry (a run
    does, when it is installed)."""
    code = (
        "import sys, treadle.evals, treadle.cli\n"
        "print(sorted(m for m in ('yaml', 'jsonschema', 'opentelemetry') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_bedrock_adapter_with_an_api_key_imports_no_botocore() -> None:
    code = (
        "import sys\n"
        "from treadle.providers import Bedrock\n"
        "from treadle.testing import WireFake\n"
        "Bedrock('anthropic.claude-3-5-sonnet-20241022-v2:0', api_key='k', region='us-east-1')\n"
        "WireFake.bedrock(['hi'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('botocore', 'boto3'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

"""Evals: measure an agent the way it is tested — offline, repeatable, compared with the
last run (docs/evals.md).

::

    from treadle.evals import Case, Contains, Dataset, Trajectory

    dataset = Dataset([
        Case("sum", input="What is 17 + 25?", expected_output="42",
             evaluators=[Contains(), Trajectory(["add"])]),
    ])
    report = await dataset.evaluate(agent, repeat=5)
    report.print()

A :class:`Dataset` of :class:`Case` objects (in Python, or from YAML, JSON or JSONL) is run
on an agent — or a function of the model making one — on one or several models, each case
``repeat`` times; evaluators score each sample; the :class:`EvalReport` gives each case's
mean, spread and pass@k, compares with a baseline report, and is written as JSON, a table
or one HTML page. ``treadle eval`` runs it from the shell; a pytest fixture runs it in
tests (``treadle.evals.pytest_plugin``). YAML and JSON Schema dicts need the ``evals``
extra; nothing else does.
"""

from .checks import (
    EXPECTED,
    Bounds,
    Check,
    Contains,
    Equals,
    MatchesSchema,
    OutputEquals,
    Regex,
    evaluator,
)
from .comparison import CaseChange, Comparison, EvalRegression, ModelChange
from .core import Case, EvalContext, Evaluator, Score, User
from .dataset import Dataset
from .judge import Judge
from .recorded import ToolAnswer
from .report import EvalReport
from .results import CaseResult, EvaluatorStats, ModelSummary, SampleResult, pass_at_k
from .runner import EvalRun, ModelSpec, Target, evaluate, evaluate_sync
from .trajectory import Call, Trajectory

__all__ = [
    "EXPECTED",
    "Bounds",
    "Call",
    "Case",
    "CaseChange",
    "CaseResult",
    "Check",
    "Comparison",
    "Contains",
    "Dataset",
    "Equals",
    "EvalContext",
    "EvalRegression",
    "EvalReport",
    "EvalRun",
    "Evaluator",
    "EvaluatorStats",
    "Judge",
    "MatchesSchema",
    "ModelChange",
    "ModelSpec",
    "ModelSummary",
    "OutputEquals",
    "Regex",
    "SampleResult",
    "Score",
    "Target",
    "ToolAnswer",
    "Trajectory",
    "User",
    "evaluate",
    "evaluate_sync",
    "evaluator",
    "pass_at_k",
]

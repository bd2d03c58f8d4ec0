"""Context management: transcript validation and repair, token budgets, compaction."""

from .transcript import (
    MISSING_RESULT_TEXT,
    TranscriptIssue,
    repair_transcript,
    validate_transcript,
)

__all__ = ["MISSING_RESULT_TEXT", "TranscriptIssue", "repair_transcript", "validate_transcript"]

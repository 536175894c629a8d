"""A small pi v3 session bundled with the package: `nexus-store import --example`."""

from __future__ import annotations

from pathlib import Path

__all__ = ["EXAMPLE_TRANSCRIPT"]

EXAMPLE_TRANSCRIPT = Path(__file__).with_name("example.jsonl")
"""A coding session with a branch, a branch summary, a compaction, labels and tool calls."""

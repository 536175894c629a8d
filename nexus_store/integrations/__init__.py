"""Integrations shipped as package data: the OpenClaw context-engine plugin (``openclaw/``).

The plugin is plain ESM JavaScript with no build step; `openclaw_plugin_dir` is where
it lies in the installed package, the folder ``openclaw plugins install -l`` links.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["openclaw_plugin_dir"]


def openclaw_plugin_dir() -> Path:
    """The folder of the OpenClaw plugin (``openclaw.plugin.json``, ``index.js``)."""
    return Path(__file__).resolve().parent / "openclaw"

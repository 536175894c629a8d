"""Workspace bootstrap files: load them, cut them to size, build the system-prompt text.

Agent runtimes inject a handful of Markdown files from the workspace into the system
prompt: the behaviour rules (``AGENTS.md``, or ``CLAUDE.md``), identity files
(``SOUL.md``, ``IDENTITY.md``, ``USER.md``), tool notes, and whatever the user
configures. OpenClaw (seeds/001) caps each file at 20,000 characters and keeps the
beginning and the end of a longer file: the first 70% of the limit, a marker, and the
last 20%. This module does the same, as pure functions; `Store.record_workspace`
records what was injected with the session (each distinct content stored once), and
`system_prompt_addition` renders the files as the text a context engine's
``assemble`` offers to prepend to the system prompt.

Lengths are counted in Unicode code points (Python ``len``); OpenClaw, in
JavaScript, counts UTF-16 code units, so text with characters outside the Basic
Multilingual Plane (most emoji) is cut a little later here, and never in the middle
of a character.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEFAULT_BOOTSTRAP_FILES",
    "DEFAULT_MAX_CHARS",
    "HEAD_RATIO",
    "TAIL_RATIO",
    "TRUNCATION_MARKER",
    "WorkspaceFile",
    "load_bootstrap_files",
    "load_workspace",
    "make_workspace_file",
    "sha256_text",
    "system_prompt_addition",
    "trim_content",
]

DEFAULT_MAX_CHARS = 20_000
"""Characters kept of one bootstrap file (OpenClaw's DEFAULT_BOOTSTRAP_MAX_CHARS)."""
HEAD_RATIO = 0.7
"""Share of the limit kept from the start of a file that is too long."""
TAIL_RATIO = 0.2
"""Share of the limit kept from the end of a file that is too long."""
TRUNCATION_MARKER = "\n\n[... content truncated ...]\n\n"
"""Put between the head and the tail of a cut file."""
DEFAULT_BOOTSTRAP_FILES = (
    "AGENTS.md",
    "CLAUDE.md",
    "SOUL.md",
    "IDENTITY.md",
    "USER.md",
    "TOOLS.md",
)
"""Files loaded from the workspace root when present, in this order."""


class WorkspaceFile(BaseModel):
    """One bootstrap file as it is injected into the system prompt.

    Attributes:
        path: The file's path as given (relative to the workspace directory for
            the default files).
        content: The text injected: the whole file, or its head, the marker and
            its tail when it was longer than ``max_chars``.
        truncated: Whether the file was cut.
        original_length: Characters in the file before cutting.
        original_sha256: Hex SHA-256 of the file's text before cutting.
        max_chars: The limit applied (None when none was).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: str
    content: str
    truncated: bool = False
    original_length: int
    original_sha256: str | None = None
    max_chars: int | None = None


def sha256_text(text: str) -> str:
    """Hex SHA-256 of a text's UTF-8 bytes (lone surrogates escaped, never an error)."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def trim_content(content: str, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[str, bool]:
    """Cut a text longer than ``max_chars`` to its head, the marker and its tail.

    A text of at most ``max_chars`` characters is returned unchanged. A longer one
    keeps its first ``floor(max_chars * 0.7)`` and last ``floor(max_chars * 0.2)``
    characters with `TRUNCATION_MARKER` between them, as OpenClaw's
    ``trimBootstrapContent`` does.

    Args:
        content: The file's text.
        max_chars: The limit, at least 1.

    Returns:
        ``(text, truncated)``.

    Raises:
        ValueError: If ``max_chars`` is less than 1.

    Example:
        >>> text, cut = trim_content("abcdefghijkl", 10)
        >>> text.split(TRUNCATION_MARKER), cut
        (['abcdefg', 'kl'], True)
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, not {max_chars}")
    if len(content) <= max_chars:
        return content, False
    head = math.floor(max_chars * HEAD_RATIO)
    tail = math.floor(max_chars * TAIL_RATIO)
    return content[:head] + TRUNCATION_MARKER + (content[-tail:] if tail else ""), True


def make_workspace_file(
    path: str, content: str, *, max_chars: int | None = DEFAULT_MAX_CHARS
) -> WorkspaceFile:
    """Build the injected form of one file from its full text.

    Args:
        path: The path to record.
        content: The file's full text.
        max_chars: The limit; None keeps the whole text.

    Returns:
        The file, cut if it was longer than ``max_chars``.
    """
    text, cut = (content, False) if max_chars is None else trim_content(content, max_chars)
    return WorkspaceFile(
        path=path,
        content=text,
        truncated=cut,
        original_length=len(content),
        original_sha256=sha256_text(content),
        max_chars=max_chars,
    )


def load_workspace(
    workspace_dir: str | Path,
    *,
    files: Iterable[str | Path] = (),
    names: Sequence[str] = DEFAULT_BOOTSTRAP_FILES,
    max_chars: int | None = DEFAULT_MAX_CHARS,
) -> list[WorkspaceFile]:
    """Read the bootstrap files of a workspace, each cut to ``max_chars``.

    The default files (``names``) are read from the workspace root when they exist,
    in order; then each configured file in ``files`` (relative to the workspace, or
    absolute). A file listed twice is read once. Files are decoded as UTF-8, bad
    bytes replaced.

    Args:
        workspace_dir: The workspace directory.
        files: More files to load, after the default ones.
        names: The default file names (default `DEFAULT_BOOTSTRAP_FILES`).
        max_chars: Per-file character limit; None for no limit.

    Returns:
        The files found, in load order. Missing default files are skipped.

    Raises:
        FileNotFoundError: If the directory or a configured file does not exist.
    """
    root = Path(workspace_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"workspace directory {root} does not exist")
    wanted: list[tuple[str, Path, bool]] = [(name, root / name, False) for name in names]
    for extra in files:
        target = Path(extra) if Path(extra).is_absolute() else root / extra
        wanted.append((str(extra), target, True))
    seen: set[Path] = set()
    loaded: list[WorkspaceFile] = []
    for label, target, required in wanted:
        if not target.is_file():
            if required:
                raise FileNotFoundError(f"configured bootstrap file {target} does not exist")
            continue
        resolved = target.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        text = target.read_bytes().decode("utf-8", errors="replace")
        loaded.append(make_workspace_file(label, text, max_chars=max_chars))
    return loaded


load_bootstrap_files = load_workspace
"""Alias of `load_workspace` (OpenClaw's name; `nexus_store.engine` calls it this)."""


def system_prompt_addition(files: Sequence[WorkspaceFile]) -> str:
    """Render bootstrap files as a system-prompt section (empty for no files).

    Args:
        files: The files, in the order they should appear.

    Returns:
        A Markdown section: a heading, one line on what follows, then each file
        under a ``## path`` heading with its injected content.

    Example:
        >>> print(system_prompt_addition([make_workspace_file("AGENTS.md", "Be brief.")]))
        # Project Context
        <BLANKLINE>
        The following workspace files were loaded for this session.
        <BLANKLINE>
        ## AGENTS.md
        <BLANKLINE>
        Be brief.
    """
    if not files:
        return ""
    parts = ["# Project Context", "The following workspace files were loaded for this session."]
    for file in files:
        parts.append(f"## {file.path}")
        parts.append(file.content.rstrip("\n"))
    return "\n\n".join(parts)

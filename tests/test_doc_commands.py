"""Every ``nexus-store`` command in the README and docs/ runs against the bundled example.

Issue 15, item 9: the README named a turn the example does not have. Each code block of
README.md and docs/*.md (docs/cli.md's embedded ``--help`` examples included) is scanned
for command lines; each runs, in the page's order, on a database holding the example
session, in a scratch folder with the files the docs name. ``~`` is a scratch home whose
agent folders hold transcripts. A command must exit 0 (a ``gc`` that asks, answered
"no", exits 1 and removes nothing). Commands that need a PostgreSQL server or an LLM
endpoint are listed in NEEDS with the test that covers them.
"""

from __future__ import annotations

import glob
import json
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store.cli import cli
from nexus_store.examples import EXAMPLE_TRANSCRIPT

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIXTURES = ROOT / "tests" / "fixtures" / "jsonl"

# Commands that need something this test does not start, and the tests that cover them.
NEEDS = {
    "postgresql:": "a PostgreSQL server (tests/test_postgres.py runs copy against one)",
    "--summarizer openai": "an LLM endpoint (tests/test_summarizer.py serves one on 127.0.0.1)",
    "openclaw install": "OpenClaw itself (tests/test_openclaw_e2e.py installs into openclaw 2026.9.6)",
    "openclaw uninstall": "OpenClaw itself (tests/test_openclaw_e2e.py uninstalls from it)",
    "nexus-store serve": "a service that runs until stopped (tests/test_service.py::TestProcess)",
    "-db ~/agents.db serve": "a service that runs until stopped (tests/test_service.py::TestProcess)",
    "--watch": "runs until Ctrl-C (tests/test_sync.py follows appends, then interrupts it)",
}


def blocks(page: Path) -> list[str]:
    """The text of each fenced code block of a page."""
    found: list[str] = []
    current: list[str] | None = None
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            if current is None:
                current = []
            else:
                found.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return found


def commands(page: Path) -> list[str]:
    """The nexus-store command lines of a page's code blocks (continuations joined)."""
    found = []
    for block in blocks(page):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            piped = line.startswith("cat ") and "| nexus-store " in line
            if not (line.startswith("nexus-store ") or piped) or "[--" in line:
                continue  # prose, a usage synopsis, or another program (the README's
                # install line runs verbatim in CI)
            found.append(line)
    return found


def _args(command: str, home: Path) -> tuple[list[str], str | None, str | None]:
    """argv after ``nexus-store``, the stdin file, and the stdout file of a command line."""
    stdin = out = None
    if command.startswith("cat "):
        stdin, command = command[4:].split("|", 1)[0].strip(), command.split("|", 1)[1].strip()
    command = command.split(" | ", 1)[0]  # `| jq ...`: the output is checked as JSON here
    words = shlex.split(command, comments=True)
    if ">" in words:
        out = words[words.index(">") + 1]
        words = words[: words.index(">")]
    argv: list[str] = []
    for word in words[1:]:
        if word.startswith("~"):
            expanded = str(home) + word[1:]
            argv += sorted(glob.glob(expanded)) or [expanded]
        else:
            argv.append(word)
    return argv, stdin, out


def _home(tmp_path: Path) -> Path:
    """A home whose agent folders hold transcripts, as the docs' examples assume."""
    home = tmp_path / "home"
    pi = home / ".pi" / "agent" / "sessions" / "--repo--"
    pi.mkdir(parents=True)
    shutil.copy(EXAMPLE_TRANSCRIPT, pi / "example.jsonl")
    claude = home / ".claude" / "projects" / "-home-me-repo"
    claude.mkdir(parents=True)
    shutil.copy(FIXTURES / "claude-code-parallel.jsonl", claude / "session.jsonl")
    openclaw = home / ".openclaw" / "agents" / "main" / "sessions"
    openclaw.mkdir(parents=True)
    shutil.copy(FIXTURES / "oc-7f3a.jsonl.reset.2026-02-24T10-05-00.000Z", openclaw / "oc.jsonl")
    return home


def test_every_page_is_scanned() -> None:
    found = {page.name: commands(page) for page in PAGES}
    assert len(found["README.md"]) >= 10
    assert any("navigate latest" in c for c in found["README.md"])
    assert len(found["cli.md"]) >= 30  # the --help examples


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_commands_run_on_the_example(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = commands(page)
    if not lines:
        pytest.skip(f"{page.name} shows no nexus-store command")
    home = _home(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(EXAMPLE_TRANSCRIPT, work / "session.jsonl")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    db = work / "sessions.db"
    monkeypatch.setenv("NEXUS_STORE_DB", str(db))
    runner = CliRunner()
    result = runner.invoke(cli, ["import", "--example", "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ran = 0
    for line in lines:
        if any(marker in line for marker in NEEDS):
            continue
        argv, stdin, out = _args(line, home)
        data = Path(stdin).read_bytes() if stdin else b"n\n"
        result = runner.invoke(cli, argv, input=data, catch_exceptions=False)
        declined = argv[0] == "gc" and "nothing was removed" in result.output
        assert result.exit_code == 0 or declined, f"{page.name}: {line}\n{result.output}"
        if "--json" in argv and "| jq" in line:
            json.loads(result.stdout)
        if out:
            Path(out).write_text(result.stdout)
        ran += 1
    assert ran

"""Docs that match the code: the CLI reference is generated, README examples run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_cli_reference_is_up_to_date() -> None:
    docs = sorted(str(p) for p in (ROOT / "docs").glob("*.md") if "[[[cog" in p.read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NEXUS_STORE_DB": "", "XDG_DATA_HOME": ""}
    env.pop("NEXUS_STORE_DB")
    result = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "-I", str(ROOT), *docs],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr + "\nrun: cog -r -I . docs/*.md"


def test_every_command_is_in_the_cli_reference() -> None:
    from click.testing import CliRunner  # noqa: F401

    from nexus_store.cli import cli

    text = (ROOT / "docs" / "cli.md").read_text()
    for name, command in cli.commands.items():
        assert f"## nexus-store {name}\n" in text
        for sub in getattr(command, "commands", {}):
            assert f"## nexus-store {name} {sub}\n" in text


def test_readme_starts_with_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert "pip install -e ." in blocks[0] and "import --example" in blocks[0]
    assert 'pip install -e ".[test]"' in blocks[1] and "pytest" in blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[0].strip() in ci  # CI runs both commands as written
    assert blocks[1].strip() in ci


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "sessions.db").exists()

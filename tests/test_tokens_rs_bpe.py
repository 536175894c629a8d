"""The cl100k_base counter gives tiktoken's counts whichever library counts.

rs-bpe counts where its wheel is installed and tiktoken elsewhere (`nexus_store.tokens`);
a stored count must not depend on which one a machine has. Both are compared on every
string value of every line of the real transcripts in the corpus (skipped where
../shared/corpus is absent), and on the shapes where encoders differ most.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from nexus_store.tokens import Cl100kCounter, _rs_bpe_cl100k, _tiktoken_cl100k
from tests.conftest import corpus_dir

rs_bpe = pytest.importorskip("rs_bpe", reason="rs-bpe has no wheel for this platform")

EDGES = [
    "",
    " ",
    " " * 5000,
    "<|endoftext|> and <|fim_prefix|> as text",
    "a\ud800b lone surrogates \udfff",
    "\x00\x01 control",
    "héllo 😀 wörld 日本語のテキスト",
    "x" * 300_000,  # one very long word
    "def f(x):\n    return x  # code\n\n\n" * 2000,
    "1234567890" * 100,
]


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def test_rs_bpe_is_the_counter_when_installed() -> None:
    counter = Cl100kCounter()
    counter.count(["warm"])
    assert counter._count.__qualname__.startswith("_rs_bpe_cl100k")


@pytest.mark.parametrize("text", EDGES, ids=range(len(EDGES)))
def test_rs_bpe_equals_tiktoken_on_edge_cases(text: str) -> None:
    assert _rs_bpe_cl100k()(text) == _tiktoken_cl100k()(text)


def test_rs_bpe_equals_tiktoken_on_every_corpus_string() -> None:
    rs, tk = _rs_bpe_cl100k(), _tiktoken_cl100k()
    checked = 0
    for path in sorted(corpus_dir().rglob("*.jsonl")):
        for number, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
            try:
                value = json.loads(line)
            except ValueError:
                continue  # the corpus holds malformed lines on purpose
            for text in strings(value):
                assert rs(text) == tk(text), f"{path.name}:{number}: {text[:80]!r}"
                checked += 1
    assert checked > 10_000

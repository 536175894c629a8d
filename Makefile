# The steps CI runs (.ci/run), one target each.
.PHONY: lint test cog bench all

lint:
	ruff check nexus_store tests
	ruff format --check nexus_store
	mypy

test:
	python -m pytest

cog:
	cog --check -I . docs/*.md

bench:
	python benchmarks/run.py --quick

all: lint test cog

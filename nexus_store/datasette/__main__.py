"""Print the Datasette metadata for a database name: ``python -m nexus_store.datasette``."""

from __future__ import annotations

import argparse
import json

from nexus_store.datasette import DEFAULT_DATABASE, metadata


def main(argv: list[str] | None = None) -> None:
    """Print metadata JSON keyed by ``--database`` (default: sessions)."""
    parser = argparse.ArgumentParser(
        prog="python -m nexus_store.datasette",
        description="Print Datasette metadata (canned queries) for a nexus_store database.",
        epilog="Example: python -m nexus_store.datasette --database mydb > metadata.json",
    )
    parser.add_argument(
        "--database",
        default=DEFAULT_DATABASE,
        help="Datasette database name: the database file's stem (default: %(default)s).",
    )
    args = parser.parse_args(argv)
    print(json.dumps(metadata(args.database), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

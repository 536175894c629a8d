"""Schema migrations: the numbered ``schema/NNNN_name.sql`` files, applied in order.

Each file is one sqlite-utils migration named after its stem, in the migration set
``nexus_store``; the file and its row in ``_sqlite_migrations`` commit together. A
file whose first line is ``-- transactional: false`` runs outside a transaction.
Released files are never edited, renamed or reordered. A database that records a
migration this code does not know was written by a newer nexus_store and is
refused rather than guessed at.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nexus_store.errors import SchemaOutOfDate

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "MIGRATION_SET",
    "applied",
    "build_migrations",
    "ensure_current",
    "is_current",
    "refuse_pending",
    "schema_files",
]

MIGRATION_SET = "nexus_store"


def schema_files() -> list[Path]:
    """Return the schema files in the order they apply.

    In a wheel they ship as ``nexus_store/_schema``; in a source checkout they are the
    repository's ``schema/`` folder.
    """
    here = Path(__file__).resolve().parent
    for folder in (here / "_schema", here.parent / "schema"):
        if folder.is_dir():
            return sorted(folder / name for name in os.listdir(folder) if _is_schema_file(name))
    raise FileNotFoundError("nexus_store schema files not found (expected nexus_store/_schema)")


def _is_schema_file(name: str) -> bool:
    # The names glob "[0-9][0-9][0-9][0-9]_*.sql" matches, without compiling the pattern
    # at every open (issue 17: start-up).
    number = name[:4]
    return (
        len(name) >= 9
        and number.isascii()
        and number.isdigit()
        and name[4] == "_"
        and name.endswith(".sql")
    )


def is_current(conn: Any) -> bool:
    """Whether a SQLite database records exactly the migrations of this code's schema files.

    The check every open makes first, with two reads and without sqlite-utils (issue
    17: start-up); anything else (a new database, migrations to apply, migrations
    this code does not know) goes through `ensure_current` or `refuse_pending`.

    Args:
        conn: A connection to the database (sqlite3).
    """
    if (
        conn.execute(
            "select 1 from sqlite_master where type = 'table' and name = '_sqlite_migrations'"
        ).fetchone()
        is None
    ):
        return False
    rows = conn.execute(
        "select name from _sqlite_migrations where migration_set = ?", [MIGRATION_SET]
    ).fetchall()
    return {row[0] for row in rows} == {path.stem for path in schema_files()}


def build_migrations() -> sqlite_utils.Migrations:
    """Register one migration per schema file, in filename order."""
    import sqlite_utils

    migrations = sqlite_utils.Migrations(MIGRATION_SET)
    for path in schema_files():
        sql = path.read_text(encoding="utf-8")
        transactional = not sql.startswith("-- transactional: false")

        def apply(db: sqlite_utils.Database, sql: str = sql) -> None:
            db.executescript(sql)

        migrations(name=path.stem, transactional=transactional)(apply)
    return migrations


def applied(db: sqlite_utils.Database) -> list[str]:
    """Names of the migrations recorded in the database, in the order applied."""
    import sqlite_utils

    return [m.name for m in sqlite_utils.Migrations(MIGRATION_SET).applied(db)]


def ensure_current(db: sqlite_utils.Database, migrations: sqlite_utils.Migrations) -> list[str]:
    """Apply pending migrations; refuse a database newer than this code.

    Args:
        db: The database, with no transaction open.
        migrations: The registered migrations.

    Returns:
        The names of the migrations applied now.

    Raises:
        SchemaOutOfDate: If the database records migrations this code does not know.
    """
    known = {m.name for m in migrations._migrations}
    unknown = [name for name in applied(db) if name not in known]
    if unknown:
        raise SchemaOutOfDate(
            f"the database was written by a newer nexus_store (schema {unknown[-1]} is unknown "
            f"to this version, which knows up to {max(known)}); upgrade nexus_store to open it"
        )
    pending = [m.name for m in migrations.pending(db)]
    if pending:
        migrations.apply(db)
    return pending


def refuse_pending(
    db: sqlite_utils.Database, migrations: sqlite_utils.Migrations, why: str
) -> None:
    """Check a database that cannot be written: current is fine, anything else is refused.

    Args:
        db: The database, opened read-only.
        migrations: The registered migrations.
        why: Why it cannot be written (for the message).

    Raises:
        SchemaOutOfDate: If it records migrations this code does not know, or needs one.
    """
    known = {m.name for m in migrations._migrations}
    recorded = applied(db) if db["_sqlite_migrations"].exists() else []
    unknown = [name for name in recorded if name not in known]
    if unknown:
        raise SchemaOutOfDate(
            f"the database was written by a newer nexus_store (schema {unknown[-1]} is unknown "
            f"to this version, which knows up to {max(known)}); upgrade nexus_store to open it"
        )
    pending = sorted(known - set(recorded))
    if pending:
        raise SchemaOutOfDate(
            f"the database needs schema upgrades ({', '.join(pending)}) that cannot be written: "
            f"{why}. Open it once with write access to upgrade it"
        )

"""A real PostgreSQL for the tests (``scripts/postgres-local-up.sh``; ``task test`` starts it).

Each test gets a database of its own, made and dropped here, on the server that
``ASTRA_TEST_POSTGRES`` names (default: the one the script makes). Fails (never skips) when that
server is not up: CI starts it first.
"""

from __future__ import annotations

import os
import secrets

import pytest

URL = os.environ.get("ASTRA_TEST_POSTGRES", "postgresql://astra:astra@127.0.0.1:5432/astra")
UP_HINT = "start it with `bash scripts/postgres-local-up.sh` (as root; `task postgres:up`)"


def _admin():
    import psycopg

    try:
        return psycopg.connect(URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"The local PostgreSQL is not up ({URL}): {exc}; {UP_HINT}", pytrace=False)


def _database():
    name = f"astra_t_{secrets.token_hex(6)}"
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield URL.rsplit("/", 1)[0] + "/" + name
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres():
    """The URL of a new, empty database (dropped afterwards)."""
    yield from _database()


@pytest.fixture
def another_postgres():
    """A second new database, for the source state beside the control plane's."""
    yield from _database()

"""The run's database URLs (tests/support/databases.py), built without a server."""

from __future__ import annotations

from cronlease._lease.database import normalize_url
from tests.support.databases import RUN_NAME, mysql_run_url, postgres_run_url


def test_the_postgres_run_url_sets_search_path_and_keeps_the_rest() -> None:
    url = postgres_run_url("postgresql://me:pw@db.example:6543/app?sslmode=disable", "s_1")
    assert "options=-csearch_path%3Ds_1" in url
    parsed = normalize_url(url)  # what cronlease's engines are made from
    assert parsed.drivername == "postgresql+psycopg"
    assert (parsed.username, parsed.password, parsed.host, parsed.port, parsed.database) == (
        "me",
        "pw",
        "db.example",
        6543,
        "app",
    )
    assert dict(parsed.query) == {
        "sslmode": "disable",
        "options": "-csearch_path=s_1",
        "application_name": "s_1",
    }


def test_the_postgres_run_url_appends_to_configured_options() -> None:
    url = postgres_run_url("postgresql://u@h/d?options=-cstatement_timeout%3D5000", "s")
    assert normalize_url(url).query["options"] == "-cstatement_timeout=5000 -csearch_path=s"


def test_the_mysql_run_url_names_the_run_database() -> None:
    parsed = normalize_url(
        mysql_run_url("mysql://root:pw@127.0.0.1:3306/test?charset=utf8mb4", "x")
    )
    assert (parsed.drivername, parsed.database, parsed.password) == ("mysql+pymysql", "x", "pw")
    assert dict(parsed.query) == {"charset": "utf8mb4"}


def test_the_run_name_is_unique_per_run_and_a_plain_identifier() -> None:
    assert RUN_NAME.startswith("cronlease_test_")
    assert RUN_NAME.removeprefix("cronlease_test_").isalnum() and RUN_NAME.islower()

"""A database URL that is not one: the message shows what was given and, for what looks
like a file path, the SQLite URL meant (``--database /tmp/x.db`` said ``'<invalid URL>'``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronlease import LeaseStore
from cronlease._lease.database import normalize_url
from cronlease.errors import ConfigError, StoreError


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            "/tmp/x.db",
            "database URL '/tmp/x.db' is not a valid URL (a SQLite file? sqlite:////tmp/x.db)",
        ),
        (
            "leases.db",
            "database URL 'leases.db' is not a valid URL (a SQLite file? sqlite:///leases.db)",
        ),
        ("data/leases", "(a SQLite file? sqlite:///data/leases)"),
        ("not a url", "database URL 'not a url' is not a valid URL"),
    ],
)
def test_a_path_given_as_a_url_is_named_with_the_url_it_needs(given: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        normalize_url(given)
    assert said in str(caught.value)
    if " " in given:
        assert "sqlite:" not in str(caught.value)  # no suggestion for what is not a path


def test_a_password_in_what_was_given_is_not_repeated() -> None:
    with pytest.raises(ConfigError) as caught:
        normalize_url("user:hunter2secret@db host")
    assert "hunter2secret" not in str(caught.value)


def test_a_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    """SQLite says "unable to open database file" and no more: which file, we say."""
    url = f"sqlite:///{tmp_path}/no/such/folder/leases.db"
    store = LeaseStore.from_url(url)
    try:
        with pytest.raises(StoreError) as caught:
            store.create_tables()
    finally:
        store.dispose()
    assert f"{tmp_path}/no/such/folder/leases.db" in str(caught.value)
    assert "unable to open database file" in str(caught.value)

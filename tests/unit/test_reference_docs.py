"""The docs' generated tables are what the code's tables render (support/reference_docs.py)."""

from __future__ import annotations

import pytest

from tests.support.reference_docs import TABLES, Generated


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.name)
def test_the_committed_table_is_the_rendered_one(table: Generated) -> None:
    assert table.committed() == table.render(), (
        f"{table.path.name}'s {table.name} table is out of date: "
        "python -m tests.support.reference_docs rewrites it"
    )

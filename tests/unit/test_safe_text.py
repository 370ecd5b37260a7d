"""The surface rules for foreign text: controls escaped, secrets hidden (issue 11, item 13).

The commands end to end: tests/processes/test_hostile_text.py.
"""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import create_engine

from cronlease import LeaseStore
from cronlease._lease.database import redact
from cronlease._safe_text import escape_controls, redact_secrets
from cronlease._status import Scrubber


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # retitles a terminal
        ("\x1b[2J", "\\x1b[2J"),  # clears it
        ("a\rb\x00c\x7f", "a\\x0db\\x00c\\x7f"),
        ("\x9b2J", "\\x9b2J"),  # the C1 form of ESC [
        ("txt.\u202eexe", "txt.\\u202eexe"),  # right-to-left override
        ("\u2066x\u2069 \u200f \u061c", "\\u2066x\\u2069 \\u200f \\u061c"),
        ("line\u2028other", "line\\u2028other"),
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),  # kept by default
        ("günlük é 日本", "günlük é 日本"),  # visible text untouched
    ],
)
def test_controls_are_escaped(text: str, shown: str) -> None:
    assert escape_controls(text) == shown


def test_newlines_are_escaped_where_lines_are_not_kept() -> None:
    assert escape_controls("a\nb\tc", keep="") == "a\\x0ab\\x09c"
    assert escape_controls("\x1b\u202e", keep="", unicode_escapes=True) == "\\u001b\\u202e"


@pytest.mark.parametrize(
    "text",
    [
        "connect to postgresql://app:s3cr%40t%21x@db:5432/app failed",
        "connect to postgresql://app:s3cr@t!x@db/app failed",  # not encoded
        "mysql+pymysql://root:ab@127.0.0.1/test",  # short
        "postgresql://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write",  # multi-host
        "postgresql://u@h/db?sslmode=require&password=hunter2",
        "host=db user=app password=hunter2 dbname=app",
        "host=db password='with space' dbname=app",
        "{'password': 'hunter2', 'user': 'app'}",
    ],
)
def test_passwords_in_urls_and_connection_strings_are_hidden_at_any_length(text: str) -> None:
    hidden = redact_secrets(text)
    assert "***" in hidden
    for secret in ("s3cr", "hunter2", ":ab@", ":p@", "with space"):
        assert secret not in hidden, hidden


def test_urls_without_a_password_are_left_alone() -> None:
    for text in ("postgresql://db:5432/app", "see https://example.com/a:b@c", "user@host:22"):
        assert redact_secrets(text) == text


def test_the_known_password_is_hidden_plain_and_url_encoded_in_any_mix() -> None:
    scrub = Scrubber("s3cr@t!x")
    for form in ("s3cr@t!x", "s3cr%40t%21x", "s3cr%40t!x", "s3cr@t%21x"):
        assert scrub(f"said [{form}] twice [{form}]") == "said [***] twice [***]"
    # hex digits in either case; a space as %20 or +
    assert Scrubber("p a/ss")("p+a%2fss and p%20a%2Fss") == "*** and ***"
    # too short to replace in prose, but hidden in a URL
    assert Scrubber("abc")("abc def") == "abc def"
    assert Scrubber("abc")("postgresql://u:abc@h/db") == "postgresql://u:***@h/db"


def test_a_url_is_rendered_without_any_password() -> None:
    assert redact("postgresql://u:s%40@h/db?password=x&sslmode=require") == (
        "postgresql://u:***@h/db?password=***&sslmode=require"
    )


def test_every_cronlease_log_line_is_made_safe(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cronlease")
    # a store remembers its password: hidden from every later log line
    store = LeaseStore(create_engine("postgresql+psycopg://app:Wh1sper%23@127.0.0.1:1/x"))
    logger = logging.getLogger("cronlease")
    logger.warning("driver said: %s", "bad password Wh1sper# \x1b[2J")
    try:
        raise RuntimeError("in the traceback: \x1b]0;t\x07 postgresql://a:b@h/d Wh1sper%23")
    except RuntimeError:
        logger.exception("task failed")
    store.dispose()
    text = caplog.text
    for raw in ("\x1b", "\x07", "Wh1sper", ":b@"):
        assert raw not in text, text
    assert "bad password *** \\x1b[2J" in text
    assert "in the traceback: \\x1b]0;t\\x07 postgresql://a:***@h/d ***" in text

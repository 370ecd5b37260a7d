"""The notice cookie over HTTPS is pinned as the CSRF cookie is: ``__Host-``, ``Secure``,
``Path=/``; over HTTP it is the mount point's. Each reads only its own name."""

from __future__ import annotations

from cronlease.web.notice import Notice, clear_notice, notice_of, set_notice


def test_over_https_the_notice_is_a_host_cookie_and_read_only_by_that_name() -> None:
    name, value = set_notice(Notice("pause", "paused", "backup"), "/ops", secure=True)
    assert name == "Set-Cookie"
    assert value.startswith("__Host-cronlease_notice=pause.paused.backup;")
    assert "; Path=/; Secure;" in value and "/ops" not in value
    assert clear_notice("/ops", secure=True)[1].startswith("__Host-cronlease_notice=;")
    sent = {"cookie": value.split(";")[0]}
    assert notice_of(sent, secure=True) == Notice("pause", "paused", "backup")
    # a plain cookie planted by a plain-HTTP answer or a sibling subdomain is not read
    assert notice_of({"cookie": "cronlease_notice=pause.paused.backup"}, secure=True) is None


def test_over_http_the_notice_is_the_mount_points() -> None:
    value = set_notice(Notice("run", "ended-failed", "b a"), "/ops", secure=False)[1]
    assert value.startswith("cronlease_notice=run.ended-failed.b%20a;")
    assert "Path=/ops/;" in value and "Secure" not in value
    notice = notice_of({"cookie": value.split(";")[0]}, secure=False)
    assert notice is not None and notice.task == "b a" and not notice.good
    assert notice.words() == "run finished: failed"


def test_a_schedules_notice_names_its_write_and_no_other() -> None:
    value = set_notice(Notice("schedule-set", "changed", "ns:export"), "", secure=False)[1]
    notice = notice_of({"cookie": value.split(";")[0]}, secure=False)
    assert notice == Notice("schedule-set", "changed", "ns:export") and notice.good
    assert notice.words() == "schedule changed"
    for planted in ("schedule-drop.removed.x", "schedule-add.ended-failed.x"):
        assert notice_of({"cookie": f"cronlease_notice={planted}"}, secure=False) is None

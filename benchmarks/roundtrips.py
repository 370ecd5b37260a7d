"""Round trips per tick, per backend, counted on the wire.

A counting TCP proxy sits between cronlease and the server; every request the
client sends (a burst of bytes after a reply) counts as one round trip. For
SQLite (no wire) the statements, BEGINs and COMMITs sent to the library are
counted instead. Cases: an executed tick through the single-task path
(acquire + finish/release) and a skipped one (slot taken); and a batch of 100
tasks (one acquire for all + one finish for all).

    python benchmarks/roundtrips.py [--backends postgresql,mysql,sqlite]
"""

from __future__ import annotations

import argparse
import secrets
import select
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import header, table, url_for, write_json
from sqlalchemy import event
from sqlalchemy.engine import make_url

from cronlease._lease.database import create_store_engine
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease
from cronlease._lease.store import LeaseStore


class CountingProxy:
    """Forwards TCP; counts client requests (client sends that follow a server reply)."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.requests = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(self.upstream)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        last_from_client = False
        while True:
            readable, _, _ = select.select([client, server], [], [])
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    client.close()
                    server.close()
                    return
                if sock is client:
                    if not last_from_client:
                        with self._lock:
                            self.requests += 1
                    last_from_client = True
                    server.sendall(data)
                else:
                    last_from_client = False
                    client.sendall(data)


def count(backend: str, tmp: Path) -> dict[str, float]:
    url = url_for(backend, tmp)
    proxy = None
    if backend != "sqlite":
        parsed = make_url(url)
        proxy = CountingProxy(parsed.host or "127.0.0.1", parsed.port or 0)
        url = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    engine = create_store_engine(url, pool_size=1, max_overflow=0)
    store = LeaseStore(engine)
    store.create_tables()
    sqlite_calls = {"n": 0}
    if backend == "sqlite":
        event.listen(
            engine,
            "before_cursor_execute",
            lambda *a: sqlite_calls.__setitem__("n", sqlite_calls["n"] + 1),
        )
        event.listen(
            engine, "commit", lambda *a: sqlite_calls.__setitem__("n", sqlite_calls["n"] + 1)
        )
        event.listen(
            engine, "rollback", lambda *a: sqlite_calls.__setitem__("n", sqlite_calls["n"] + 1)
        )

    def counter() -> int:
        return sqlite_calls["n"] if proxy is None else proxy.requests

    def measure(action: Any) -> int:
        action()  # warm: connection open, statements prepared
        time.sleep(0.05)
        before = counter()
        action()
        time.sleep(0.05)
        return counter() - before

    prefix = f"rt-{secrets.token_hex(3)}"
    slot = [int(time.time() * 1000) - 60_000]

    def executed() -> None:
        slot[0] += 1
        lease = store.acquire(
            AcquireRequest(name=f"{prefix}-one", slot=slot[0], ttl=5, holder="rt", tolerance=1)
        )
        assert isinstance(lease, Lease)
        store.finish(lease, "succeeded")

    def acquire_only() -> None:
        slot[0] += 1
        name = f"{prefix}-a{slot[0]}"
        lease = store.acquire(
            AcquireRequest(name=name, slot=slot[0], ttl=5, holder="rt", tolerance=1)
        )
        assert isinstance(lease, Lease)
        acquired.append(lease)

    acquired: list[Lease] = []

    def finish_only() -> None:
        store.finish(acquired.pop(), "succeeded")

    def skipped() -> None:
        store.acquire(AcquireRequest(name=f"{prefix}-one", slot=0, ttl=5, holder="rt", tolerance=1))

    def batch() -> None:
        slot[0] += 1
        requests = [
            AcquireRequest(name=f"{prefix}-b{i:03d}", slot=slot[0], ttl=5, holder="rt", tolerance=1)
            for i in range(100)
        ]
        results = store.acquire_many(requests)
        store.finish_many(
            [FinishRequest.of(r, "succeeded", None) for r in results if isinstance(r, Lease)]
        )

    out = {
        "acquire (won)": measure(acquire_only),
        "executed tick": measure(executed),
        "skipped tick": measure(skipped),
        "batch of 100 (acquire + finish)": measure(batch),
    }
    acquire_only()
    acquire_only()
    out["finish + release"] = measure(finish_only)
    store.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="postgresql,mysql,sqlite")
    parser.add_argument("--json")
    args = parser.parse_args()
    header("round trips per tick (PostgreSQL, MySQL: requests on the wire; SQLite: library calls)")
    rows = []
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            counts = count(backend, Path(tmp))
            rows.append([backend, *counts.values()])
            figures.update({f"{backend}.{key}": float(value) for key, value in counts.items()})
            keys = list(counts)
    table(["backend", *keys], rows)
    print(
        "pool checkout/return included (MySQL: no reset-on-return ROLLBACK; the ROLLBACK of a"
        " connection closed after a request that committed is skipped)"
    )
    write_json(args.json, "roundtrips", figures)


if __name__ == "__main__":
    main()

"""A network namespace of a test's own, joined to this host by a veth pair.

``with Namespace() as ns:`` makes ``cl<hex>`` with a link-local /30 (the host
side ``ns.host_address``, the namespace side ``ns.address``), and deletes both
on exit. A process started with ``prefix=ns.exec`` lives in it and reaches
this host only at ``ns.host_address`` (a :class:`~tests.support.tcpproxy.TcpProxy`
listening there forwards to a local server). ``ns.cut()`` drops, inside the
namespace, every packet coming from the host — a blackhole, not a refusal: the
process's packets leave, no answer comes back, connections hang as they do
when a network drops packets — and ``ns.heal()`` takes that rule away.
:func:`problem` says why namespaces cannot be made here (then the test skips).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from types import TracebackType


def problem() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: iproute2, iptables)"
    probe = f"clprobe{secrets.token_hex(3)}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"cannot make a network namespace here: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


class Namespace:
    def __init__(self) -> None:
        tag = secrets.token_hex(4)
        self.name = f"cl{tag}"
        self._host_link, self._link = f"vh{tag}", f"vn{tag}"
        # 169.254/16 is link-local: these addresses exist on this veth pair only
        octet, block = secrets.randbelow(254) + 1, secrets.randbelow(63) * 4
        self.host_address = f"169.254.{octet}.{block + 1}"
        self.address = f"169.254.{octet}.{block + 2}"
        self.exec = ("ip", "netns", "exec", self.name)

    def __enter__(self) -> Namespace:
        _run("ip", "netns", "add", self.name)
        try:
            _run("ip", "link", "add", self._host_link, "type", "veth", "peer", "name", self._link)
            _run("ip", "link", "set", self._link, "netns", self.name)
            _run("ip", "addr", "add", f"{self.host_address}/30", "dev", self._host_link)
            _run("ip", "link", "set", self._host_link, "up")
            _run(*self.exec, "ip", "addr", "add", f"{self.address}/30", "dev", self._link)
            _run(*self.exec, "ip", "link", "set", self._link, "up")
            _run(*self.exec, "ip", "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _rule(self, action: str) -> None:
        _run(*self.exec, "iptables", action, "INPUT", "-s", self.host_address, "-j", "DROP")

    def cut(self) -> None:
        self._rule("-A")

    def heal(self) -> None:
        self._rule("-D")

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        subprocess.run(["ip", "link", "del", self._host_link], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

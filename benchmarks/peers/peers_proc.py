"""The procrastinate app that ``procrastinate --app peers_proc.app schema --apply`` reads
(peers.py passes the database in ``PEERS_DB``)."""

from __future__ import annotations

import os

import procrastinate

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=os.environ["PEERS_DB"]))

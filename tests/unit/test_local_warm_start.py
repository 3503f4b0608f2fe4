"""Emulators forked from the warm process (local/emulator/warm_start.py): each its own server, from one fork server,
stopped as a subprocess is; a server that cannot listen says so."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from local.emulator.server import Emulator


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_two_emulators_are_forked_by_one_warm_process_keep_their_own_tables_and_stop():
    with Emulator() as first, Emulator(record_transactions=True) as second:
        assert first.url != second.url
        assert first.proc.poll() is None and second.proc.poll() is None
        warm = parent_of(first.proc.pid)
        assert warm == parent_of(second.proc.pid) != os.getpid()  # not started as programs of this process
        for emulator, table in ((first, "first-table"), (second, "second-table")):
            client = emulator.client()
            client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
            client.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": {"pk": {"S": "a"}}}}])
        assert first.client().list_tables()["TableNames"] == ["first-table"]
        assert second.client().list_tables()["TableNames"] == ["second-table"]
        assert len(second.commits) == 1  # the options reach the forked server
        forked = first.proc
    assert forked.poll() is not None  # stopped with the context
    with Emulator() as third:
        assert parent_of(third.proc.pid) == warm  # the same warm process, not a new one


def test_a_forked_emulator_that_cannot_listen_says_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RuntimeError, match="exited before it listened"):
            Emulator(port=taken.getsockname()[1]).start(timeout=20)

"""CPU per request of the embedded emulator, with its speed-ups and as plain moto, in one run.

    .venv/bin/python bench/emulator_requests.py               # 1,000 rounds per client, 2 clients
    .venv/bin/python bench/emulator_requests.py --rounds 3000

Starts the emulator (local/emulator/server.py) twice, once as the local engine and the tests start it (moto 5.2.5 with
the patches of local/emulator/moto_patches.py, item_responses.py and index_reads.py) and once without them
(``Emulator(fast_transactions=False)``: moto's own server behind the same lock), makes the queue table as the template
declares it, and has two client threads each send ``rounds`` times a PutItem, a conditional UpdateItem and a GetItem (a
claim's shape). Prints the server's CPU per request (from /proc), the clients' CPU per request and the wall time per
request. The e2e and reliability tests spend most of their CPU in this server and these clients.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.emulator.server import Emulator  # noqa: E402
from tests.support import create_queue_table  # noqa: E402

TABLE = "bench-queue"


def process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def claims(emulator: Emulator, client_id: int, rounds: int) -> None:
    client = emulator.client()
    for n in range(rounds):
        key = {"taskId": {"S": f"c{client_id}-{n % 50}"}}
        client.put_item(TableName=TABLE, Item={**key, "taskStatus": {"S": "PENDING"}, "n": {"N": "1"}})
        client.update_item(TableName=TABLE, Key=key, UpdateExpression="SET n = n + :one, taskStatus = :taken",
                           ConditionExpression="taskStatus = :pending",
                           ExpressionAttributeValues={":one": {"N": "1"}, ":taken": {"S": "TAKEN"},
                                                      ":pending": {"S": "PENDING"}})
        client.get_item(TableName=TABLE, Key=key)


def measure(fast: bool, rounds: int, clients: int = 2) -> dict[str, float]:
    with Emulator(fast_transactions=fast) as emulator:
        assert emulator.proc is not None
        create_queue_table(emulator.client(), TABLE)
        claims(emulator, -1, 20)  # warm: the first requests load moto's backends
        server_before, client_before, started = process_cpu_seconds(emulator.proc.pid), time.process_time(), time.monotonic()
        threads = [threading.Thread(target=claims, args=(emulator, c, rounds)) for c in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        requests = clients * rounds * 3
        return {"server_ms": 1000 * (process_cpu_seconds(emulator.proc.pid) - server_before) / requests,
                "client_ms": 1000 * (time.process_time() - client_before) / requests,
                "wall_ms": 1000 * (time.monotonic() - started) / requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1000, help="claims per client thread (3 requests each)")
    args = parser.parse_args()
    rows = [("emulator (the engine's)", measure(True, args.rounds)), ("plain moto server", measure(False, args.rounds))]
    print(f"{'server':<26} {'server CPU ms/request':>22} {'clients CPU ms/request':>23} {'wall ms/request':>16}")
    for name, row in rows:
        print(f"{name:<26} {row['server_ms']:>22.2f} {row['client_ms']:>23.2f} {row['wall_ms']:>16.2f}")


if __name__ == "__main__":
    main()

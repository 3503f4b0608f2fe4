"""The local stack of `make up` (`python -m local up`) in a child process, for benchmarks that measure it in real
seconds: a free port, its own discovery file, and clients of its endpoint. A subclass reads the stack's output lines
(``on_line``)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parent.parent
START_SECONDS = 180


class LocalStack:
    def __init__(self, overrides: list[str], prefix: str = "stack-") -> None:
        self.port = free_port()
        self.discovery = Path(tempfile.mkdtemp(prefix=prefix)) / "stack.json"
        command = [sys.executable, "-m", "local", "up", "--port", str(self.port), "--discovery", str(self.discovery),
                   "--param-overrides", *overrides]
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(START_SECONDS):
            self.stop()
            raise RuntimeError(f"the local stack did not come up within {START_SECONDS} s")
        record = json.loads(self.discovery.read_text())
        self.outputs: dict[str, str] = record["outputs"]
        kw = {"endpoint_url": record["endpoint_url"], "region_name": record["region"], "aws_access_key_id": "x",
              "aws_secret_access_key": "x", "config": Config(retries={"mode": "standard", "max_attempts": 6})}
        self.ddb = boto3.client("dynamodb", **kw)
        self.lam = boto3.client("lambda", **kw)
        self.table = self.outputs["QueueTableName"]

    def on_line(self, line: str) -> None:
        """One line the stack printed (after it came up or before)."""

    def invoke(self, function: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Invoke the function the stack's output ``function`` names (RequestResponse); its error raised."""
        response = self.lam.invoke(FunctionName=self.outputs[function], Payload=json.dumps(payload).encode())
        answer = json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError"):
            raise RuntimeError(f"{function} failed: {answer}")
        return answer

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("Local stack "):
                self._ready.set()
            self.on_line(line)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

"""Watches the queue table's stream (every record, before any filter) and keeps the story of each task:
created, claimed (with its age and how many newer claimable tasks were waiting), finished, shed (by a reader
that met it past its ttl, PENDING -> SHED, or by DynamoDB's TTL deleting it while PENDING)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

FINAL = ("SUCCESS", "FAILURE", "CANCELLED")


def _n(image: dict[str, Any], name: str) -> int | None:
    value = image.get(name)
    return int(float(value["N"])) if value and "N" in value else None


def _s(image: dict[str, Any], name: str) -> str | None:
    value = image.get(name)
    return value.get("S") if value else None


def _tenant(image: dict[str, Any]) -> str | None:
    group = _s(image, "taskGroup")
    if group:
        return group
    try:
        tenant = json.loads(_s(image, "payload") or "{}").get("tenant")
    except ValueError:
        return None
    return str(tenant) if tenant is not None else None


@dataclass
class Track:
    task_id: str
    queue: str
    created_ms: int
    order_ms: int
    priority: int
    ttl: int
    status: str = "PENDING"
    not_before_ms: int | None = None
    removed: str | None = None  # "shed", "cleaned", "deleted"
    claims: int = 0
    tenant: str | None = None  # its group, else the tenant its payload names (the tenants scenario without groups)
    claimed_ms: list[int] = field(default_factory=list)  # the claim time of each attempt


@dataclass
class Observer:
    started: float = field(default_factory=time.time)
    tasks: dict[str, Track] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)  # t, age_ms, task_id, newer_waiting
    finishes: list[tuple[float, str]] = field(default_factory=list)  # t, status
    sheds: list[tuple[float, str, int]] = field(default_factory=list)  # t, task_id, age_ms
    lock: threading.Lock = field(default_factory=threading.Lock)

    def consume(self, records: list[dict[str, Any]]) -> None:
        with self.lock:
            for record in records:
                self._apply(record)

    def _apply(self, record: dict[str, Any]) -> None:
        ddb = record.get("dynamodb", {})
        new, old = ddb.get("NewImage") or {}, ddb.get("OldImage") or {}
        name = record.get("eventName")
        image = new or old
        task_id = _s(image, "taskId")
        if not task_id or _s(image, "taskStatus") is None:
            return  # not a task (an agent, say)
        now = time.time()
        if name == "INSERT":
            created = _n(new, "taskCreated") or int(now * 1000)
            self.tasks[task_id] = Track(task_id, _s(new, "queue") or "", created, _n(new, "enqueued") or created,
                                        _n(new, "priority") or 0, _n(new, "ttl") or 0, _s(new, "taskStatus") or "PENDING",
                                        _n(new, "notBefore"))
            self.tasks[task_id].tenant = _tenant(new)
            return
        track = self.tasks.get(task_id)
        if track is None:
            return
        if name == "MODIFY":
            before, after = _s(old, "taskStatus"), _s(new, "taskStatus") or track.status
            track.ttl = _n(new, "ttl") or track.ttl
            track.not_before_ms = _n(new, "notBefore")
            if before == "PENDING" and after == "TAKEN":
                updated = _n(new, "taskUpdated") or int(now * 1000)
                track.claims += 1
                track.claimed_ms.append(updated)
                self.claims.append({"t": now - self.started, "age_ms": updated - track.created_ms, "task_id": task_id,
                                    "queue": track.queue, "newer_waiting": self._newer_waiting(track, updated),
                                    "first": track.claims == 1})
            if after in FINAL and before not in FINAL:
                self.finishes.append((now - self.started, after))
            if before == "PENDING" and after == "SHED":
                self.sheds.append((now - self.started, task_id, int(now * 1000) - track.created_ms))
            track.status = after
        elif name == "REMOVE":
            ttl_delete = (record.get("userIdentity") or {}).get("principalId") == "dynamodb.amazonaws.com"
            if not ttl_delete:
                track.removed = "deleted"
            elif track.status == "PENDING":  # (a SHED task's deletion is cleanup: it was counted when shed)
                track.removed = "shed"
                self.sheds.append((now - self.started, task_id, int(now * 1000) - track.created_ms))
            else:
                track.removed = "cleaned"

    def _newer_waiting(self, claimed: Track, at_ms: int) -> int:
        """Claimable tasks of the same queue and priority that were newer than the claimed one (for LIFO: 0)."""
        count = 0
        for t in self.tasks.values():
            if (t.status == "PENDING" and t.removed is None and t.queue == claimed.queue and t.task_id != claimed.task_id
                    and t.priority == claimed.priority and t.order_ms > claimed.order_ms and t.ttl > at_ms // 1000
                    and (t.not_before_ms is None or t.not_before_ms <= at_ms)):
                count += 1
        return count

    def counts(self) -> dict[str, int]:
        with self.lock:
            out = {"created": len(self.tasks), "PENDING": 0, "TAKEN": 0, "SUCCESS": 0, "FAILURE": 0, "CANCELLED": 0,
                   "shed": 0, "expired_waiting": 0}
            now_s = int(time.time())
            for t in self.tasks.values():
                if t.removed == "shed" or t.status == "SHED":
                    out["shed"] += 1
                    continue
                out[t.status] = out.get(t.status, 0) + 1
                if t.status == "PENDING" and t.ttl <= now_s:
                    out["expired_waiting"] += 1
            return out

    def outcome_of(self, task_id: str) -> str | None:
        with self.lock:
            t = self.tasks.get(task_id)
            if t is None:
                return None
            return "SHED" if t.removed == "shed" else t.status  # status SHED: shed by a reader

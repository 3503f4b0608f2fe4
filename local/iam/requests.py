"""What IAM authorizes for one AWS request: the (action, resource) pairs AWS checks before it does anything.

Most requests are the operation's name on the resource they name (``dynamodb:GetItem`` on the table,
``table/<t>/index/<i>`` for a Query or Scan of an index). A TransactWriteItems is authorized per item, with the
action of each item's operation (PutItem / UpdateItem / DeleteItem / ConditionCheckItem on each item's table); a
TransactGetItems as GetItem per item; a batch as the batch action on every table it names.
``ReturnValuesOnConditionCheckFailure`` and ``ClientRequestToken`` need nothing more. An EventBridge Scheduler
request is ``scheduler:<Operation>`` on ``schedule/${<group's logical id>}/<name>`` (the stack's schedule group, as
the template's grants name it) and, when it passes a role to the schedule's target, ``iam:PassRole`` on that role.

Resources are named by the template's logical ids (``QueueTable``, ``QueueTable/index/ReadyIndex``,
``WorkerWakeUpTopic``), so that a request and a grant compare without account, region or stack; a physical name
``Names`` does not know stays as ``?<name>`` (unmapped). The standard library only: the local engine's sandboxes
import this module beside the function's code.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

TRANSACT_ACTIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
UNMAPPED = "?"

Grant = tuple[str, str]  # (IAM action, resource key)


@dataclass(frozen=True)
class Names:
    """Physical names (a table's name, a topic's ARN or name, a queue's URL, a role's ARN, a schedule group's name)
    -> logical ids, and the stack's name."""

    physical: Mapping[str, str] = field(default_factory=dict)
    stack: str | None = None

    def logical(self, physical: str) -> str:
        """The logical id of ``physical``; an ARN or URL is also looked up by its last part (a topic's or queue's
        name). Unknown: ``?<physical>``."""
        for candidate in (physical, physical.rsplit(":", 1)[-1], physical.rsplit("/", 1)[-1]):
            if candidate in self.physical:
                return self.physical[candidate]
        return UNMAPPED + physical


def iam_requests(service: str, operation: str, params: Mapping[str, Any], names: Names) -> Iterator[Grant]:
    """The (action, resource key) pairs AWS authorizes for one request of ``service`` (botocore's endpoint prefix)."""
    if service == "dynamodb":
        yield from _dynamodb(operation, params, names)
    elif service == "sns" and "TopicArn" in params:
        yield f"sns:{operation}", names.logical(str(params["TopicArn"]))
    elif service == "sqs" and "QueueUrl" in params:
        yield f"sqs:{operation}", names.logical(str(params["QueueUrl"]))
    elif service == "scheduler" and "Name" in params:
        group = str(params.get("GroupName") or "default")
        logical = names.physical.get(group)  # the stack's own group, granted as schedule/${<its logical id>}/...
        where = f"schedule/${{{logical}}}" if logical else UNMAPPED + f"schedule/{group}"
        yield f"scheduler:{operation}", f"{where}/{params['Name']}"
        if "RoleArn" in (params.get("Target") or {}):
            yield "iam:PassRole", names.logical(str(params["Target"]["RoleArn"]))
    else:
        yield f"{service}:{operation}", UNMAPPED + "unmapped"


def _dynamodb(operation: str, params: Mapping[str, Any], names: Names) -> Iterator[Grant]:
    if operation == "TransactWriteItems":
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            yield f"dynamodb:{TRANSACT_ACTIONS[kind]}", names.logical(body["TableName"])
    elif operation == "TransactGetItems":
        for item in params["TransactItems"]:
            yield "dynamodb:GetItem", names.logical(item["Get"]["TableName"])
    elif operation in ("BatchGetItem", "BatchWriteItem"):
        for table in params["RequestItems"]:
            yield f"dynamodb:{operation}", names.logical(table)
    elif "TableName" in params:
        resource = names.logical(str(params["TableName"]))
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        yield f"dynamodb:{operation}", resource
    else:
        yield f"dynamodb:{operation}", UNMAPPED + "unmapped"


def is_mapped(resource: str) -> bool:
    return not resource.startswith(UNMAPPED)


def allows(granted: Iterable[Grant], action: str, resource: str) -> bool:
    """Does a grant allow ``action`` on ``resource``? Grants' resources may hold IAM's wildcards (``*``, ``?``)."""
    return any(a == action and fnmatch.fnmatchcase(resource, r) for a, r in granted)

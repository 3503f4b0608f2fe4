"""The emulator's dispatch patch (local/emulator/moto_patches.py): a host's service and a handler's actions found once,
the same answers as moto's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.emulator.moto_patches import patch_dispatch_lookups

HOSTS = {
    "dynamodb.us-east-1.amazonaws.com": "dynamodb",
    "streams.dynamodb.us-east-1.amazonaws.com": "dynamodbstreams",
    "sns.us-east-1.amazonaws.com": "sns",
    "sqs.us-east-1.amazonaws.com": "sqs",
    "scheduler.us-east-1.amazonaws.com": "scheduler",
    "dynamodb": "dynamodb",
    None: None,
}


@pytest.fixture
def unpatched() -> Iterator[None]:
    """moto as it is: tests/conftest.py patches it for in-process moto (undone here, put back after)."""
    from tests import conftest

    conftest.UNDO_DISPATCH_LOOKUPS()
    try:
        yield
    finally:
        conftest.UNDO_DISPATCH_LOOKUPS = patch_dispatch_lookups()


def test_a_hosts_service_is_the_same_with_the_patch_and_moto_lists_its_folder_once_per_host(
        unpatched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    dispatcher = DomainDispatcherApplication(create_backend_app)
    unpatched_answers = {host: dispatcher.get_backend_for_host(host) for host in HOSTS}
    assert unpatched_answers == HOSTS  # what moto itself answers (a moto upgrade that changes it shows here)

    listed = []
    real_list = backends.list_of_moto_modules
    monkeypatch.setattr(backends, "list_of_moto_modules", lambda: listed.append(1) or real_list())
    undo = patch_dispatch_lookups()
    try:
        for _ in range(3):
            assert {host: dispatcher.get_backend_for_host(host) for host in HOSTS} == unpatched_answers
        assert len(listed) == len([host for host in HOSTS if host is not None])  # once per host, not per request
    finally:
        undo()
    listed.clear()
    dispatcher.get_backend_for_host("sns.us-east-1.amazonaws.com")
    assert listed == [1]  # undone: moto lists its folder again


def test_a_handlers_actions_are_listed_once_and_are_motos_own(unpatched: None) -> None:
    from moto.core import responses
    from moto.dynamodb.responses import DynamoHandler
    from moto.sns.responses import SNSResponse

    theirs = {cls: responses.method_names_from_class(cls) for cls in (DynamoHandler, SNSResponse)}
    assert "update_item" in theirs[DynamoHandler] and "publish" in theirs[SNSResponse]
    undo = patch_dispatch_lookups()
    try:
        for cls, names in theirs.items():
            assert responses.method_names_from_class(cls) == names
            assert responses.method_names_from_class(cls) is responses.method_names_from_class(cls)  # remembered
    finally:
        undo()
    assert responses.method_names_from_class(DynamoHandler) is not responses.method_names_from_class(DynamoHandler)

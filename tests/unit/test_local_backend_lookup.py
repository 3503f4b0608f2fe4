"""The emulator's host lookup patch (local/emulator/moto_patches.py): each host's service found once."""

from __future__ import annotations

import pytest

HOSTS = {
    "dynamodb.us-east-1.amazonaws.com": "dynamodb",
    "streams.dynamodb.us-east-1.amazonaws.com": "dynamodbstreams",
    "sns.us-east-1.amazonaws.com": "sns",
    "sqs.us-east-1.amazonaws.com": "sqs",
    "scheduler.us-east-1.amazonaws.com": "scheduler",
    "dynamodb": "dynamodb",
    None: None,
}


def test_a_hosts_service_is_the_same_with_the_patch_and_moto_lists_its_folder_once_per_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from local.emulator.moto_patches import patch_backend_lookup

    dispatcher = DomainDispatcherApplication(create_backend_app)
    unpatched = {host: dispatcher.get_backend_for_host(host) for host in HOSTS}
    assert unpatched == HOSTS  # what moto itself answers (a moto upgrade that changes it shows here)

    listed = []
    real_list = backends.list_of_moto_modules
    monkeypatch.setattr(backends, "list_of_moto_modules", lambda: listed.append(1) or real_list())
    undo = patch_backend_lookup()
    try:
        for _ in range(3):
            assert {host: dispatcher.get_backend_for_host(host) for host in HOSTS} == unpatched
        assert len(listed) == len([host for host in HOSTS if host is not None])  # once per host, not per request
    finally:
        undo()
    listed.clear()
    dispatcher.get_backend_for_host("sns.us-east-1.amazonaws.com")
    assert listed == [1]  # undone: moto lists its folder again

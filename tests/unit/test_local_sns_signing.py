"""The emulator's SNS patch (local/emulator/moto_patches.py): one signing key for every subscription."""

from __future__ import annotations


def test_sns_subscriptions_share_one_signing_key_while_patched_and_the_undo_restores_what_was_there():
    from moto.sns.models import Subscription

    from local.emulator.moto_patches import patch_sns_signing_key

    first, second = object.__new__(Subscription), object.__new__(Subscription)
    before = Subscription.private_key  # tests/conftest.py patches it for in-process moto too
    undo = patch_sns_signing_key()
    try:
        assert Subscription.private_key is not before
        assert first.private_key() is second.private_key()
    finally:
        undo()
    assert Subscription.private_key is before

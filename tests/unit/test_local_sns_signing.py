"""The emulator's SNS patch (local/emulator/moto_patches.py): one signing key for every subscription."""

from __future__ import annotations


def test_sns_subscriptions_share_one_signing_key_while_patched_and_sign_with_their_own_after():
    from moto.sns.models import Subscription

    from local.emulator.moto_patches import patch_sns_signing_key

    first, second = object.__new__(Subscription), object.__new__(Subscription)
    undo = patch_sns_signing_key()
    try:
        assert first.private_key() is second.private_key()
    finally:
        undo()
    assert first.private_key() is not second.private_key()  # moto's own: a key per subscription

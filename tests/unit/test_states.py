import itertools

import pytest

from taskqueue.core.errors import InvalidTransition
from taskqueue.core.states import ALLOWED_TRANSITIONS, TaskStatus, check_transition

LEGAL = {
    ("PENDING", "TAKEN"), ("PENDING", "CANCELLED"), ("PENDING", "PENDING"),
    ("TAKEN", "SUCCESS"), ("TAKEN", "FAILURE"), ("TAKEN", "PENDING"),
    ("FAILURE", "PENDING"), ("CANCELLED", "PENDING"),
    ("PENDING", "SHED"), ("TAKEN", "TAKEN"),
    ("TAKEN", "CANCELLED"),  # a caller hung up while a matcher held the call (taskqueue.matching.hangup)
    ("PENDING", "SUCCESS"),  # a call matched: the match transaction takes it straight from waiting (store.matches)
    # A workflow's task waiting for its dependencies (docs/workflows.md): ready, blocked by a dependency's end, cancelled,
    # past its workflow's deadline, an on-failure task not needed; and a blocked one waits again when its blocker is
    # redriven.
    ("WAITING", "PENDING"), ("WAITING", "FAILURE"), ("WAITING", "CANCELLED"), ("WAITING", "SHED"), ("WAITING", "SUCCESS"),
    ("FAILURE", "WAITING"), ("CANCELLED", "WAITING"),
}


@pytest.mark.parametrize("source,target", list(itertools.product(list(TaskStatus), repeat=2)))
def test_every_pair_is_allowed_exactly_when_the_lifecycle_says_so(source, target):
    if (source.value, target.value) in LEGAL:
        check_transition(source, target)
    else:
        with pytest.raises(InvalidTransition):
            check_transition(source, target)


def test_refusal_names_both_states_and_the_allowed_targets():
    with pytest.raises(InvalidTransition, match="from PENDING to FAILURE.*CANCELLED, PENDING, SHED, SUCCESS, TAKEN"):
        check_transition("PENDING", "FAILURE")


def test_success_is_final():
    assert ALLOWED_TRANSITIONS[TaskStatus.SUCCESS] == frozenset()
    with pytest.raises(InvalidTransition, match="none \\(it is final\\)"):
        check_transition(TaskStatus.SUCCESS, TaskStatus.PENDING)


def test_unknown_state_is_refused():
    with pytest.raises(ValueError):
        check_transition("DONE", "PENDING")


def test_shed_is_final():
    assert ALLOWED_TRANSITIONS[TaskStatus.SHED] == frozenset()
    with pytest.raises(InvalidTransition):
        check_transition(TaskStatus.SHED, TaskStatus.PENDING)

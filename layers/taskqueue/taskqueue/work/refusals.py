"""How a claiming run hands on a control read or write that DynamoDB refused (``ClaimControl``'s ``refused``)."""

from __future__ import annotations

from collections.abc import Callable

# refused(what, error, then) -> True when the error was passing and is handled (logged, counted); else False.
Refused = Callable[[str, Exception, str], bool]

"""The item container of an indexed moto table (``table.items``), reporting every placement and removal of an item
to the table's index (``local/emulator/table_index.py``): moto's put and delete, and ``wsgi_request.set_item`` (index lag's
look into the past, the item-size limit's undo, the transactions' rollback) all go through it. Shaped like moto's
``defaultdict(dict)``: hash -> Item for a table without a range key, hash -> Group (range -> Item) with one. A copy
(``copy.deepcopy`` of a restore) is plain dicts again: a table holding one is indexed afresh at its next read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any


class Group(dict):  # type: ignore[type-arg]
    """The range key -> Item dict of one hash value, reporting every change to the index."""

    __slots__ = ("_index", "_hash")

    def __init__(self, index: Any, hash_value: Any, contents: Iterable[tuple[Any, Any]] = ()) -> None:
        super().__init__(contents)
        self._index = index
        self._hash = hash_value

    def __setitem__(self, range_value: Any, item: Any) -> None:
        dict.__setitem__(self, range_value, item)
        self._index.refresh(self._hash, range_value, item)

    def __delitem__(self, range_value: Any) -> None:
        dict.__delitem__(self, range_value)
        self._index.refresh(self._hash, range_value, None)

    def pop(self, range_value: Any, *default: Any) -> Any:
        if dict.__contains__(self, range_value):
            item = dict.pop(self, range_value)
            self._index.refresh(self._hash, range_value, None)
            return item
        return dict.pop(self, range_value, *default)

    def popitem(self) -> tuple[Any, Any]:
        range_value, item = dict.popitem(self)
        self._index.refresh(self._hash, range_value, None)
        return range_value, item

    def setdefault(self, range_value: Any, default: Any = None) -> Any:
        if not dict.__contains__(self, range_value):
            self[range_value] = default
        return dict.__getitem__(self, range_value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for range_value, item in dict(*args, **kwargs).items():
            self[range_value] = item

    def clear(self) -> None:
        while self:
            self.popitem()

    def __ior__(self, other: Any) -> Group:
        self.update(other)
        return self

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        import copy

        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in dict.items(self)}

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class Items(dict):  # type: ignore[type-arg]
    """``table.items`` of an indexed table: hash -> Item (no range key) or hash -> Group, like moto's
    ``defaultdict(dict)`` (a missing hash reads as a new, empty group), reporting every change to the index."""

    __slots__ = ("_index",)

    def __init__(self, index: Any) -> None:
        super().__init__()
        self._index = index

    def __missing__(self, hash_value: Any) -> Group:
        group = Group(self._index, hash_value)
        dict.__setitem__(self, hash_value, group)
        return group

    def _adopt(self, hash_value: Any, value: Any) -> Any:
        if isinstance(value, dict) and not (isinstance(value, Group) and value._index is self._index):
            return Group(self._index, hash_value, dict.items(value))
        return value

    def __setitem__(self, hash_value: Any, value: Any) -> None:
        old = dict.get(self, hash_value)
        value = self._adopt(hash_value, value)
        dict.__setitem__(self, hash_value, value)
        self._index.replaced(hash_value, old, value)

    def __delitem__(self, hash_value: Any) -> None:
        old = dict.pop(self, hash_value)
        self._index.replaced(hash_value, old, None)

    def pop(self, hash_value: Any, *default: Any) -> Any:
        if dict.__contains__(self, hash_value):
            old = dict.pop(self, hash_value)
            self._index.replaced(hash_value, old, None)
            return old
        return dict.pop(self, hash_value, *default)

    def popitem(self) -> tuple[Any, Any]:
        hash_value, old = dict.popitem(self)
        self._index.replaced(hash_value, old, None)
        return hash_value, old

    def setdefault(self, hash_value: Any, default: Any = None) -> Any:
        if not dict.__contains__(self, hash_value):
            self[hash_value] = default
        return dict.__getitem__(self, hash_value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for hash_value, value in dict(*args, **kwargs).items():
            self[hash_value] = value

    def clear(self) -> None:
        while self:
            self.popitem()

    def __ior__(self, other: Any) -> Items:
        self.update(other)
        return self

    def __copy__(self) -> defaultdict[Any, Any]:
        return defaultdict(dict, dict.items(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> defaultdict[Any, Any]:
        import copy

        return defaultdict(dict, {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in dict.items(self)})

    def __reduce__(self) -> Any:
        return (defaultdict, (dict, dict(self)))

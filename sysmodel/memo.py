"""A bounded memo for pure pricing functions: the same arguments give the same floats, so a repeated lookup
(the arbiter at loads it has seen, a prompt length already priced) returns the stored result instead of
recomputing it. Bounded so that a long run's memory stays flat: when full it starts again empty,
which changes what is recomputed, never a result."""
from collections.abc import Callable, Hashable
from typing import Any

# Entries before the memo starts again: at most about 4 MB of prices (an iteration's Work key and its Cost), 11 MB
# of a PNM's plans and 20 MB of a GPU's plans with their loads (`sysmodel.execution`; tracemalloc of 8,192
# decode iterations), so a system of many executors stays small; enough to hold the prompt lengths and loads a
# workload revisits.
MEMO_ENTRIES = 1 << 13


class Memo:
    """`memo(key, compute, *args)`: `compute(*args)` the first time `key` is seen, the stored value after. Only for
    values that are a pure function of `key`: the key must hold everything the value depends on. (Arguments rather
    than a closure: a hit then builds nothing.)"""

    def __init__(self, entries: int = MEMO_ENTRIES) -> None:
        self._values: dict[Hashable, Any] = {}
        self._entries = entries

    def __call__(self, key: Hashable, compute: Callable[..., Any], *args: Any) -> Any:
        values = self._values
        try:
            return values[key]
        except KeyError:
            pass
        if len(values) >= self._entries:
            values.clear()
        value = values[key] = compute(*args)
        return value

"""One idiom for every extension point of the system model (systems, schedulers, routers, performance models,
memory layouts, hardware and model presets): a named, ordered collection that new modules add to with one
`register` line, that refuses an unknown name with the choices, and that the CLI and the docs iterate."""
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")


class Registry(Mapping, Generic[T]):
    """Names → items of one `kind`, in registration order. `key` normalises a name for lookup (e.g. any case);
    the registered spelling is the one listed."""

    def __init__(self, kind: str, key: Callable[[str], str] = lambda name: name) -> None:
        self.kind, self._key = kind, key
        self._items: dict[str, tuple[str, T, str]] = {}

    def register(self, name: str, item: T, help: str = "") -> T:
        """Add `item` under `name`, `help` saying what it is (the docs' tables list it); a name registered twice is
        a programming error, refused."""
        if self._key(name) in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered already")
        self._items[self._key(name)] = (name, item, help)
        return item

    def help(self, name: str) -> str:
        return self._items[self._key(name)][2]

    def lookup(self, name: str) -> T:
        """The item registered as `name`, or a `ConfigError` listing the choices."""
        if name not in self:
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self)}")
        return self[name]

    def __getitem__(self, name: str) -> T:
        return self._items[self._key(name)][1]

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self._key(name) in self._items

    def __iter__(self) -> Iterator[str]:
        return (entry[0] for entry in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

"""Command-line options carried by configuration fields: each field of a configuration dataclass names the options
that set it, how it is read from them and what makes its value invalid, so the command line, the sweep spec's keys
and the docs are generated from the configuration and its checks live in one place.

    max_batch: int = field(default=16, metadata=options(Option("--batch", "the systems' maximum decode batch",
                                                               type=int, default=16), check=at_least(1, "max batch")))
"""
import argparse
import math
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any

from .errors import ConfigError


@dataclass(frozen=True)
class Option:
    """One command-line option; `default` is the parser's (None where the field's default depends on the mode or
    where the option is checked for being given at all); `help` may be a function, called when the parser is
    built (a help listing a registry's names then lists the ones registered by then)."""
    flag: str
    help: str | Callable[[], str]
    metavar: str | None = None
    type: Callable | None = None
    default: Any = None
    action: str | None = None
    choices: tuple | None = None
    required: bool = False

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    def add_to(self, parser) -> None:
        extra = {k: v for k, v in (("action", self.action), ("metavar", self.metavar), ("type", self.type),
                                   ("choices", self.choices)) if v is not None}
        parser.add_argument(self.flag, default=[] if self.action == "append" else self.default,
                            required=self.required, help=self.help() if callable(self.help) else self.help, **extra)


# A reader builds a field's value from the parsed options and the fields read before it (its metadata "read").
Reader = Callable[[argparse.Namespace, dict], Any]


def options(*given: Option, read: Reader | None = None, check: Callable[[Any], str | None] | None = None,
            group: str | None = None) -> dict:
    """A field's metadata: the options that set it, its `read`er (default: its one option's value, or the field's
    default when not given), its `check` (the problem with a value, or None) and its help `group`."""
    return {"options": given, "read": read, "check": check, "group": group}


def at_least(low: float, what: str) -> Callable[[Any], str | None]:
    return lambda value: None if value is None or value >= low else f"{what} must be >= {low}, got {value}"


def finite(args: argparse.Namespace, *dests: str) -> None:
    """Refuse an option given as nan or inf."""
    for dest in dests:
        value = getattr(args, dest)
        if value is not None and not math.isfinite(value):
            raise ConfigError(f"--{dest.replace('_', '-')} must be a finite number, got {value}")


def check_fields(config) -> None:
    """Every field's own check, for configurations built in code."""
    for f in fields(config):
        check = f.metadata.get("check")
        problem = check(getattr(config, f.name)) if check else None
        if problem:
            raise ConfigError(problem)


def add_arguments(parser: argparse.ArgumentParser, config_type) -> None:
    """The options of every field of `config_type`, in field order, grouped by their field's `group`."""
    groups = {}
    for f in fields(config_type):
        title = f.metadata.get("group")
        if title is not None and title not in groups:
            groups[title] = parser.add_argument_group(title)
        target = parser if title is None else groups[title]
        for option in f.metadata.get("options", ()):
            option.add_to(target)


def read(config_type, args: argparse.Namespace):
    """A `config_type` from parsed options; a bad value is a `ConfigError` naming its option."""
    values: dict = {}
    for f in fields(config_type):
        value = f.metadata["read"](args, values) if f.metadata.get("read") else _one_option(f, args)
        check = f.metadata.get("check")
        problem = check(value) if check else None
        if problem:      # named by its option where the option's name is not the field's (--batch: max batch ...)
            option = f.metadata["options"][0]
            raise ConfigError(problem if option.dest == f.name else f"{option.flag}: {problem}")
        values[f.name] = value
    return config_type(**values)


def _one_option(f, args: argparse.Namespace):
    (option,) = f.metadata["options"]
    value = getattr(args, option.dest)
    return f.default if value is None and f.default is not MISSING else value

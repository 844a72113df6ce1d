"""Sweep specifications: a TOML file of base `basedie simulate` options and the axes to sweep them over.

    [base]                                  # any `simulate` option by its long name (input-len or input_len)
    system = "duopd"
    model = "LLaMA2-70B"
    hw = ["gpus=8"]                         # a repeatable option takes a list
    [axes]                                  # the grid is their product; the first axis is the plots' x axis
    "hw.pnm.lanes" = [4, 8, 16]             # OPTION.FIELD = ... is `--OPTION FIELD=...` (any --hw field)
    qps = {start = 0.5, stop = 2, step = 0.5}                  # stop included; or num = N [, spacing = "log"]
    shape = [{input-len = 8192, output-len = 128}, {input-len = 32768, output-len = 512}]   # points of several options

A point is the option list `simulate` would be given (keys sorted, so reordering the SPEC changes no point).
Options are looked up in `simulate`'s own parser: no option is listed here.
"""
import argparse
import itertools
import math
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sysmodel.errors import ConfigError

from .errors import UsageError
from .simulation import simulation_config

RANGE_KEYS = {"start", "stop", "step", "num", "spacing"}
NOT_SWEPT = {"out", "help"}     # the sweep writes one table, not a folder per point


@dataclass(frozen=True)
class Axis:
    """One axis: its values, each a {key: value} of the options it sets, and their labels for tables and plots."""
    name: str
    values: tuple[dict, ...]
    labels: tuple


@dataclass(frozen=True)
class Point:
    """One simulation: the settings it was made of ({key: value}), its label on each axis, and the `simulate`
    options they make."""
    settings: dict
    labels: dict
    options: tuple[str, ...]

    @property
    def key(self) -> str:
        """What identifies the point in a sweep's folder (resuming skips the keys already there)."""
        return shlex.join(self.options)


@dataclass(frozen=True)
class Spec:
    base: dict
    axes: tuple[Axis, ...]

    def points(self, parser: argparse.ArgumentParser) -> list[Point]:
        """Every point of the grid (first axis slowest), its options checked by `parser`."""
        points = []
        for combination in itertools.product(*(zip(axis.values, axis.labels) for axis in self.axes)):
            settings = dict(self.base)
            for values, _ in combination:
                settings.update(values)
            options = tuple(option for key in sorted(settings) for option in _options(parser, key, settings[key]))
            try:  # a bad value (--batch x, an unknown --hw field, a flag the system ignores) is the SPEC's fault
                simulation_config(parser.parse_args(options))
            except (UsageError, ConfigError) as error:
                raise UsageError(f"point {shlex.join(options)}: {error}") from None
            labels = {axis.name: label for axis, (_, label) in zip(self.axes, combination)}
            points.append(Point(settings, labels, options))
        return points


def load(path: Path, parser: argparse.ArgumentParser) -> Spec:
    """Read and check a SPEC; every problem is a UsageError naming it."""
    try:
        document = tomllib.loads(path.read_text())
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path} is not valid TOML: {error}") from None
    unknown = set(document) - {"base", "axes"}
    if unknown:
        raise UsageError(f"{path}: unknown section(s) {', '.join(sorted(unknown))} (a SPEC has [base] and [axes])")
    base = _settings(parser, document.get("base", {}), "base")
    axes_table = document.get("axes", {})
    if not isinstance(axes_table, dict) or not axes_table:
        raise UsageError(f"{path}: [axes] names no axis; give at least one")
    axes = tuple(_axis(parser, name, value) for name, value in _flatten(axes_table, is_value=_is_range))
    seen: dict[str, str] = {}
    for axis in axes:
        for key in {k for values in axis.values for k in values}:
            if key in seen:
                raise UsageError(f"axes {seen[key]!r} and {axis.name!r} both set {key!r}")
            seen[key] = axis.name
    return Spec(base, axes)


def _flatten(table: dict, prefix: str = "", is_value=lambda table: False):
    """(dotted name, value) pairs: TOML's dotted keys (hw.pnm.lanes = ...) arrive as nested tables."""
    for name, value in table.items():
        if isinstance(value, dict) and not is_value(value):
            yield from _flatten(value, f"{prefix}{name}.", is_value)
        else:
            yield prefix + name, value


def _axis(parser, name: str, value) -> Axis:
    if isinstance(value, dict):
        values = _range(name, value)
    elif isinstance(value, list) and value:
        values = value
    else:
        raise UsageError(f"axis {name!r} must be a non-empty list, a range table or a list of point tables")
    if all(isinstance(v, dict) for v in values):     # explicit points, each setting several options
        points = tuple(_settings(parser, v, f"axis {name!r}") for v in values)
        return Axis(name, points, tuple(",".join(f"{k}={v}" for k, v in p.items()) for p in points))
    if any(isinstance(v, (dict, list)) for v in values):
        raise UsageError(f"axis {name!r} mixes values and tables; give one kind")
    key = _key(parser, name)
    return Axis(key, tuple({key: v} for v in values), tuple(values))


def _range(name: str, table: dict) -> list:
    """Inclusive ranges: {start, stop, step} or {start, stop, num[, spacing = "linear" | "log"]}."""
    start, stop = table.get("start"), table.get("stop")
    numbers = [v for v in (start, stop, table.get("step")) if v is not None]
    if start is None or stop is None or ("step" in table) == ("num" in table) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers):
        raise UsageError(f"axis {name!r}: a range needs numbers start, stop and one of step or num")
    if "step" in table:
        step = table["step"]
        if step <= 0 or stop < start or "spacing" in table:
            raise UsageError(f"axis {name!r}: a step range needs step > 0 and stop >= start (no spacing)")
        count = math.floor((stop - start) / step * (1 + 1e-12)) + 1
        values = [start + i * step for i in range(count)]
    else:
        num, spacing = table["num"], table.get("spacing", "linear")
        if not isinstance(num, int) or num < 1 or spacing not in ("linear", "log") or (
                spacing == "log" and min(start, stop) <= 0) or (num == 1 and start != stop):
            raise UsageError(f"axis {name!r}: num must be an integer >= 1 (1 only when start = stop), spacing "
                             f"'linear' or 'log' (log needs start, stop > 0)")
        fractions = [i / (num - 1) if num > 1 else 0.0 for i in range(num)]
        values = [start * (stop / start) ** f if spacing == "log" else start + f * (stop - start) for f in fractions]
    values = [float(f"{v:.12g}") for v in values]   # 0.1 + 2 * 0.1 is 0.3 in the table, not 0.30000000000000004
    if all(isinstance(v, int) for v in numbers) and all(v.is_integer() for v in values):
        return [int(v) for v in values]            # integer options (--batch, pnm.lanes) stay integers
    return values


def _settings(parser, table, where: str) -> dict:
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table of options")
    settings = {}
    for name, value in _flatten(table):
        settings[_key(parser, name)] = value
    return settings


def _is_range(table: dict) -> bool:
    return set(table) <= RANGE_KEYS


def _key(parser, name: str) -> str:
    """The canonical key of a SPEC name: the long option (input-len), or OPTION.FIELD of a repeatable option."""
    option, dot, field = name.partition(".")
    action = _action(parser, option)
    if action is None or action.dest in NOT_SWEPT:
        known = sorted(a.option_strings[-1][2:] for a in parser._actions
                       if a.option_strings and a.dest not in NOT_SWEPT)
        raise UsageError(f"{name!r} is not a sweepable `basedie simulate` option (known: {', '.join(known)})")
    if dot and not isinstance(action, argparse._AppendAction):
        raise UsageError(f"{name!r}: only a repeatable option (such as hw) takes OPTION.FIELD")
    return action.option_strings[-1][2:] + (f".{field}" if dot else "")


def _action(parser, option: str):
    for action in parser._actions:
        if f"--{option.replace('_', '-')}" in action.option_strings:
            return action
    return None


def _options(parser, key: str, value) -> list[str]:
    """The `simulate` option strings of one setting."""
    option, dot, field = key.partition(".")
    action = _action(parser, option)
    flag = f"--{option}"
    if isinstance(action, argparse._StoreConstAction) and not isinstance(action, argparse._AppendConstAction):
        if not isinstance(value, bool):
            raise UsageError(f"{key!r} is a flag: give true or false, not {value!r}")
        return [flag] if value == action.const else []
    if dot:
        return [flag, f"{field}={_text(value)}"]
    if isinstance(action, argparse._AppendAction):
        values = value if isinstance(value, list) else [value]
        return [part for v in values for part in (flag, _text(v))]
    if isinstance(value, list):
        raise UsageError(f"{key!r} takes one value, not a list (sweep it as an axis)")
    return [flag, _text(value)]


def _text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)

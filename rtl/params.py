"""Block parameters: frozen dataclasses that check themselves when they are made."""
from dataclasses import dataclass, fields
from typing import Any, Self, get_type_hints


@dataclass(frozen=True)
class Params:
    """Base of every block's parameter dataclass.

    Subclasses set defaults to the paper's configuration and override `validate`, which raises
    `ValueError` naming the offending field; it runs on construction, so an invalid instance never exists.
    """

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise `ValueError` naming the field when a value or a combination is invalid."""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_strings(cls, values: dict[str, str]) -> Self:
        """Build from NAME=VALUE text (the command line), converting each value to its field's type."""
        types = get_type_hints(cls)
        known = {f.name for f in fields(cls)}
        converted = {}
        for name, text in values.items():
            if name not in known:
                raise ValueError(f"unknown parameter {name!r} (known: {', '.join(sorted(known)) or 'none'})")
            converted[name] = _convert(name, text, types[name])
        return cls(**converted)


def _convert(name: str, text: str, kind: type) -> Any:
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{name}={text!r} is not a boolean (true/false)")
        return text.lower() in ("true", "1")
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a valid {kind.__name__}") from None


# Amaranth numbers the bits of one value with 16 bits (`_nir.Net`): a port or signal wider than this fails
# deep inside elaboration, so parameter sets that would need one are refused up front.
MAX_VALUE_BITS = 1 << 16


def require_port_bits(port: str, bits: int, fields: tuple[str, ...], params: Params) -> None:
    """Reject a parameter set whose `port` would be `bits` wide, beyond what Amaranth can elaborate."""
    if bits > MAX_VALUE_BITS:
        values = ", ".join(f"{name}={getattr(params, name)}" for name in fields)
        raise ValueError(f"{values}: port {port} would be {bits:,} bits, beyond Amaranth's "
                         f"{MAX_VALUE_BITS:,}-bit limit")


def require_choice(params: Params, field: str, choices: tuple[str, ...]) -> None:
    """Reject a string parameter outside its allowed set, naming the field and the choices."""
    value = getattr(params, field)
    if value not in choices:
        raise ValueError(f"{field}={value!r} is not one of {', '.join(choices)}")


def require_power_of_two(params: Params, field: str, minimum: int = 1) -> None:
    """Reject a field that is not a power of two at least `minimum`."""
    value = getattr(params, field)
    if value < minimum or value & (value - 1):
        raise ValueError(f"{field}={value} must be a power of two ≥ {minimum}")


def require_at_least(params: Params, field: str, minimum: int) -> None:
    """Reject a field below `minimum`."""
    value = getattr(params, field)
    if value < minimum:
        raise ValueError(f"{field}={value} must be at least {minimum}")


def require_positive(params: Params, field: str) -> None:
    """Reject a field that is not above zero (a clock frequency, say; NaN included)."""
    value = getattr(params, field)
    if not value > 0:
        raise ValueError(f"{field}={value} must be positive")


@dataclass(frozen=True)
class NoParams(Params):
    """The parameters of a block that has none; every block is still built from a dataclass."""

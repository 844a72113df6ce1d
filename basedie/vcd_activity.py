"""Switching activity of a bench run: per-bit toggles per clock cycle of the signals of a block's top scope,
read from the run's value-change dump (`waves=True` writes dump.vcd) with the `pyvcd` package.

Bits that hold x or z count no toggle; a change between two known values counts the bits that differ.
"""
from pathlib import Path

from vcd.reader import TokenKind, tokenize


def toggle_rates(vcd: Path, top: str, clock: str = "clk") -> dict[str, float]:
    """`name[i]` (or `name` for one bit) -> toggles per rising edge of `clock`, for the variables declared
    directly in the scope named `top`."""
    scopes: list[str] = []
    variables: dict[str, tuple[str, int]] = {}   # id code -> (name, width)
    values: dict[str, int | None] = {}
    toggles: dict[str, list[int]] = {}
    cycles = 0
    clock_ids = set()
    with Path(vcd).open("rb") as stream:
        for token in tokenize(stream):
            kind = token.kind
            if kind is TokenKind.SCOPE:
                scopes.append(token.scope.ident)
            elif kind is TokenKind.UPSCOPE:
                scopes.pop()
            elif kind is TokenKind.VAR and scopes and scopes[-1] == top:
                var = token.var
                variables.setdefault(var.id_code, (var.reference, var.size))
                toggles.setdefault(var.id_code, [0] * var.size)
                if var.reference == clock:
                    clock_ids.add(var.id_code)
            elif kind in (TokenKind.CHANGE_SCALAR, TokenKind.CHANGE_VECTOR):
                code = token.data.id_code
                if code not in variables:
                    continue
                value = _known(token.data.value)
                if code in clock_ids and value == 1 and values.get(code) == 0:
                    cycles += 1
                before = values.get(code)
                if before is not None and value is not None:
                    changed = before ^ value
                    counts = toggles[code]
                    while changed:
                        low = changed & -changed
                        counts[low.bit_length() - 1] += 1
                        changed ^= low
                values[code] = value
    if cycles == 0:
        raise ValueError(f"{vcd}: no rising edge of {clock!r} in scope {top!r}")
    rates = {}
    for code, (name, width) in variables.items():
        for bit, count in enumerate(toggles[code]):
            rates[f"{name}[{bit}]" if width > 1 else name] = count / cycles
    return rates


def _known(value) -> int | None:
    """A VCD value as an integer, or None if any bit is x or z."""
    if isinstance(value, int):
        return value
    text = str(value).lower()
    if any(c in text for c in "xz"):
        return None
    return int(text, 2) if text else None

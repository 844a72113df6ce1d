"""The one payload packer of the benches: named fields to and from the flat integer a stream port carries,
at the offsets and widths its Amaranth layout states (benches never shift bits by hand).

A field is a plain shape (an integer), an `ArrayLayout` of them nested to any depth (a numpy array of
that shape), or a nested struct/union taken whole as one integer. `pack_many`/`unpack_many` do a whole stream of beats at once through a bit matrix, so a
16,384-bit PNM beat costs no Python loop over its elements."""
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data


@dataclass(frozen=True)
class Field:
    offset: int
    dims: tuple[int, ...]
    """Array dimensions, outermost first; () for a scalar field."""
    element_bits: int

    @property
    def bits(self) -> int:
        return self.element_bits * int(np.prod(self.dims, dtype=np.int64))


def _field(shape, offset: int) -> Field:
    if isinstance(shape, data.ArrayLayout):
        inner = _field(shape.elem_shape, 0)
        if inner.element_bits > 64:
            raise TypeError("array elements wider than 64 bits are not supported")
        return Field(offset, (shape.length, *inner.dims), inner.element_bits)
    if isinstance(shape, data.Layout):  # a nested struct or union: one opaque integer (e.g. a tag echoed back)
        return Field(offset, (), shape.size)
    return Field(offset, (), Shape.cast(shape).width)


class Packer:
    """The fields of one `data.StructLayout` (a port's payload), by name."""

    def __init__(self, layout) -> None:
        layout = data.Layout.cast(layout)
        self.width = layout.size
        self.fields = {name: _field(field.shape, field.offset) for name, field in layout}
        self._arrays = any(f.dims for f in self.fields.values())
        self._masks = {name: (f.offset, (1 << f.element_bits) - 1) for name, f in self.fields.items()}

    @classmethod
    def of_port(cls, component, port: str) -> "Packer":
        """The packer of a component's stream port (its signature's `payload` member)."""
        return cls(component.signature.members[port].signature.members["payload"].shape)

    def _check(self, names) -> None:
        unknown = set(names) - set(self.fields)
        if unknown:
            raise KeyError(f"no fields {sorted(unknown)} in {sorted(self.fields)}")

    def pack(self, **values) -> int:
        """One payload; absent fields are 0, array fields take any array-like of their shape."""
        if self._arrays and any(self.fields[name].dims for name in values if name in self.fields):
            return self.pack_many(**{name: [value] for name, value in values.items()})[0]
        self._check(values)
        word = 0
        for name, value in values.items():
            offset, mask = self._masks[name]
            word |= (int(value) & mask) << offset
        return word

    def unpack(self, word: int) -> dict:
        """One payload as {field: int, or numpy array for array fields}."""
        if self._arrays:
            return {name: column[0] if self.fields[name].dims else int(column[0])
                    for name, column in self.unpack_many([word]).items()}
        word = int(word)
        return {name: (word >> offset) & mask for name, (offset, mask) in self._masks.items()}

    def pack_many(self, **columns) -> list[int]:
        """A stream of payloads: each column has one row per beat (shape (beats, *dims)). Scalar fields wider
        than 64 bits take Python integers."""
        self._check(columns)
        beats = len(next(iter(columns.values())))
        if self.width <= 64:  # one uint64 per beat: each element shifted into place, no bit matrix
            words = np.zeros(beats, np.uint64)
            for name, column in columns.items():
                f = self.fields[name]
                mask = np.uint64((1 << f.element_bits) - 1)
                values = np.asarray(column, dtype=np.uint64).reshape(beats, -1)
                for k in range(values.shape[1]):
                    words |= (values[:, k] & mask) << np.uint64(f.offset + k * f.element_bits)
            return words.tolist()
        bits = np.zeros((beats, self.width), np.uint8)
        wide = [name for name in columns if self.fields[name].element_bits > 64]
        for name, column in columns.items():
            f = self.fields[name]
            if name in wide:
                continue
            values = np.asarray(column, dtype=np.uint64).reshape(beats, -1)
            shifts = np.arange(f.element_bits, dtype=np.uint64)
            bits[:, f.offset:f.offset + f.bits] = ((values[:, :, None] >> shifts) & 1).reshape(beats, -1)
        rows = np.packbits(bits, axis=1, bitorder="little")
        words = [int.from_bytes(row.tobytes(), "little") for row in rows]
        for name in wide:
            mask, offset = (1 << self.fields[name].element_bits) - 1, self.fields[name].offset
            words = [word | (int(value) & mask) << offset for word, value in zip(words, columns[name], strict=True)]
        return words

    def unpack_many(self, words) -> dict[str, np.ndarray]:
        """Payloads back into columns of shape (beats, *dims), `uint64` (Python integers, dtype object, for
        scalar fields wider than 64 bits)."""
        size = -(-self.width // 8)
        raw = np.frombuffer(b"".join(int(w).to_bytes(size, "little") for w in words), np.uint8)
        bits = np.unpackbits(raw.reshape(len(words), size), axis=1, bitorder="little")
        out = {}
        for name, f in self.fields.items():
            if f.element_bits > 64:
                mask = (1 << f.element_bits) - 1
                out[name] = np.array([(int(w) >> f.offset) & mask for w in words], dtype=object)
                continue
            chunk = bits[:, f.offset:f.offset + f.bits].reshape(len(words), -1, f.element_bits).astype(np.uint64)
            values = (chunk << np.arange(f.element_bits, dtype=np.uint64)).sum(axis=2, dtype=np.uint64)
            out[name] = values.reshape(len(words), *f.dims)
        return out

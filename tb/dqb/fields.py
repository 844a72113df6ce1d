"""Pack and unpack the DQB's struct payloads as the flattened integers cocotb drives and samples."""
from amaranth.lib import data


class Fields:
    """The fields of one `data.StructLayout`, by name: offset and width."""

    def __init__(self, layout: data.StructLayout) -> None:
        self.fields = {name: (field.offset, field.width) for name, field in layout}

    def pack(self, **values: int) -> int:
        unknown = set(values) - set(self.fields)
        if unknown:
            raise KeyError(f"no fields {sorted(unknown)} in {sorted(self.fields)}")
        word = 0
        for name, value in values.items():
            offset, width = self.fields[name]
            word |= (int(value) & ((1 << width) - 1)) << offset
        return word

    def unpack(self, word: int) -> dict[str, int]:
        return {name: (word >> offset) & ((1 << width) - 1) for name, (offset, width) in self.fields.items()}

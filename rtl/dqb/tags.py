"""Tag parser (StreamDQ Table 5): what a 3-bit tag asks of the datapath."""
from types import SimpleNamespace

from amaranth.hdl import Value

BYPASS = 0b000
RESERVED = 0b111
# Table 5: tag → (weight format, output format).
MODES = {
    0b001: ("int4", "bf16"), 0b010: ("int8", "bf16"), 0b011: ("fp8_e4m3", "bf16"),
    0b100: ("int4", "fp16"), 0b101: ("int8", "fp16"), 0b110: ("fp8_e4m3", "fp16"),
}


def decode(tag: Value) -> SimpleNamespace:
    """What a 3-bit tag asks of the datapath, as combinational flags."""
    def one_of(*tags: int) -> Value:
        return tag.matches(*tags)
    return SimpleNamespace(
        dequantize=~one_of(BYPASS, RESERVED),
        reserved=one_of(RESERVED),
        int4=one_of(*(t for t, (w, _) in MODES.items() if w == "int4")),
        int8=one_of(*(t for t, (w, _) in MODES.items() if w == "int8")),
        fp8=one_of(*(t for t, (w, _) in MODES.items() if w == "fp8_e4m3")),
        bf16=one_of(*(t for t, (_, o) in MODES.items() if o == "bf16")),
    )

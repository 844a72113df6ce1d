"""The start of issue 16's decode-layer proof on the golden model: one GQA group's attention for a decode token
(`tb.pnm.decode`) runs in today's ISA (no command refused) and equals float64 attention within the FP16
roundings' bound. The bench's `decode_attention` runs the same program on the RTL, bit-exact against this model."""
import numpy as np

from rtl.pnm_controller.isa import Instruction, Opcode
from tb.models import pnm_controller as control
from tb.models import pnm as model
from tb.pnm import decode

MAX_TENSOR = 128
SHAPE = model.Shape(row_bytes=decode.ROW, width=decode.TILE, lanes=2, sublane_width=4)
CONFIG = control.Config(depth=64, buffer_rows=1024, address_bits=16, row_bytes=decode.ROW,
                        max_tensor_bytes=MAX_TENSOR, id_bits=8)   # the bench's size


def test_a_decode_tokens_attention_runs_in_the_isa() -> None:
    memory = np.zeros(1 << 16, np.uint8)

    def put(address, values):
        memory[address:address + values.nbytes] = np.frombuffer(values.tobytes(), np.uint8)

    attention = decode.attention(np.random.default_rng(16), put, 0x1000, MAX_TENSOR)
    program = [*attention.program, Instruction(Opcode.DONE.value)]
    words = [0] * CONFIG.depth
    words[:len(program)] = [i.encode() for i in program]
    buffer = np.zeros(CONFIG.buffer_rows * decode.ROW, np.uint8)
    result = model.run(words, 0, CONFIG, SHAPE, memory, buffer)
    assert (result.outcome.state, result.outcome.error, result.unit_error) == ("done", control.NONE, model.UNIT_NONE)
    start = attention.out_row * decode.ROW
    got = buffer[start:start + 4 * decode.HEADS * decode.HEAD_DIM].view(np.float32).reshape(decode.HEADS, -1)
    # Activations, q, the new key and P are rounded to FP16 (2^-11 relative each) on the way, with values of
    # magnitude about 1: a bound of 4 · 2^-11 (seen: 1.1e-4). Leaving out the new token's V (weight about 1/13)
    # would be off by about 0.1.
    assert np.abs(got - attention.exact).max() < 4 * 2 ** -11, np.abs(got - attention.exact).max()

"""Instruction decode and checks, in two pipeline stages (one word per cycle): which opcode and which fields it
uses, and the errors a field alone shows; then every buffer operand's extent against the buffer. The rules are
generated from the tables of `isa.py` (docs/pnm-isa.md states them)."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..pnm_vector.ports import Reduce
from .fetch import fetched
from .isa import ACT_FUNC, ACT_OPS, COUNT_FIELDS, INSTRUCTION, KINDS, ROW_FIELDS, VOP_FUNC, VOP_OPS, ErrorCode, Kind, Operand
from .params import ControllerParams


def decoded(p: ControllerParams) -> data.StructLayout:
    """The word with its address and the error that stops the program there (`NONE`: it may issue)."""
    return data.StructLayout({"pc": p.pc_bits + 1, "error": ErrorCode, "word": INSTRUCTION})


def _any_nonzero(values: list[Value]) -> Value:
    return Cat(*(v != 0 for v in values)).any() if values else 0


def _unused_nonzero(r, kind: Kind) -> Value:
    """A reserved bit or a field `kind` does not use is set (LOAD/STORE use a, b, c as address bits)."""
    fields = [r.reserved]
    fields += [getattr(r, name) for name in COUNT_FIELDS if name not in kind.counts]
    fields += [getattr(r, name) for name in ROW_FIELDS
               if name not in kind.operands and not (kind.address and name != "d")]
    if kind.func is None:
        fields.append(r.func)
    elif kind.func == "act":   # every bit of VOP's func has a meaning
        fields.append(data.View(ACT_FUNC, r.func).reserved)
    return _any_nonzero(fields)


def _illegal(p: ControllerParams, r, address, kind: Kind) -> Value:
    """A used field holds a value its opcode does not allow."""
    bad = Cat(*(getattr(r, name) == 0 for name in kind.counts)).any() if kind.counts else 0
    if kind.func == "vop":
        func = data.View(VOP_FUNC, r.func)
        bad |= ~Cat(*(func.op == op for op in VOP_OPS)).any() | ~Cat(*(func.reduce == mode for mode in Reduce)).any()
        bad |= func.narrow & (func.reduce != Reduce.NONE)
    elif kind.func == "act":
        bad |= ~Cat(*(data.View(ACT_FUNC, r.func).op == op for op in ACT_OPS)).any()
    if kind.address:
        offset_bits = exact_log2(p.row_bytes)
        bad |= (r.n > p.mmu_params().max_tensor_bytes) | (address[:offset_bits] != 0)
    return bad


def _count(r, name: str) -> Value | int:
    return int(name) if name.isdigit() else getattr(r, name)


def _inner(r, operand: Operand) -> Value | int:
    """The operand's inner count; VOP's result (with a reduction) and b (broadcast) have one element a vector."""
    func = data.View(VOP_FUNC, r.func)
    if operand.scalar_if == "reduce":
        return Mux(func.reduce != Reduce.NONE, 1, _count(r, operand.inner))
    if operand.scalar_if == "broadcast":
        return Mux(func.broadcast, 1, _count(r, operand.inner))
    return _count(r, operand.inner)


def _shift(r, operand: Operand) -> Value | int:
    """log2 of the operand's element bytes; VOP's result is FP16 with `narrow`."""
    if operand.half_if == "narrow":
        return Mux(data.View(VOP_FUNC, r.func).narrow, exact_log2(2), exact_log2(operand.element_bytes))
    return exact_log2(operand.element_bytes)


def _select(terms) -> Value:
    """The value whose (mutually exclusive) condition holds, or 0."""
    out = Const(0, 1)
    for hit, value in terms:
        out = out | Mux(hit, value, 0)
    return out


class Decode(wiring.Component):
    """`i` (fetched words) → `o` (checked words), two cycles, one word per cycle; `flush` empties both stages."""

    latency = 2

    def __init__(self, params: ControllerParams) -> None:
        self.params = params
        super().__init__({
            "i": In(stream.Signature(fetched(params))),
            "flush": In(1),
            "o": Out(stream.Signature(decoded(params))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        advance = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(advance)

        # Stage 1: the opcode's rules, and each operand's element count outer × inner.
        word = data.View(INSTRUCTION, self.i.payload.word)
        r, address = word.r, word.mem.address
        # One term per opcode, each zero unless the word has that opcode (no case statement: Verilator counts
        # every uncovered opcode of one as a lint warning).
        opcodes = {opcode: r.opcode == opcode.value for opcode in KINDS}
        known = Cat(*opcodes.values()).any()
        unused = _select((hit, _unused_nonzero(r, KINDS[opcode])) for opcode, hit in opcodes.items())
        illegal = _select((hit, _illegal(p, r, address, KINDS[opcode])) for opcode, hit in opcodes.items())
        memory = _select((hit, 1) for opcode, hit in opcodes.items() if KINDS[opcode].address)
        used, outer, inner, shift = {}, {}, {}, {}
        for f in ROW_FIELDS:
            shapes = [(hit, KINDS[opcode].operands[f]) for opcode, hit in opcodes.items() if f in KINDS[opcode].operands]
            used[f] = _select((hit, 1) for hit, _ in shapes)
            outer[f] = _select((hit, _count(r, operand.outer)) for hit, operand in shapes)
            inner[f] = _select((hit, _inner(r, operand)) for hit, operand in shapes)
            shift[f] = _select((hit, _shift(r, operand)) for hit, operand in shapes)
        early = Signal(ErrorCode)
        with m.If(self.i.payload.pc[p.pc_bits]):
            m.d.comb += early.eq(ErrorCode.END)
        with m.Elif(~known):
            m.d.comb += early.eq(ErrorCode.OPCODE)
        with m.Elif(unused):
            m.d.comb += early.eq(ErrorCode.RESERVED)
        with m.Elif(illegal):
            m.d.comb += early.eq(ErrorCode.FIELD)

        s1_valid, s1_pc, s1_word = Signal(), Signal.like(self.i.payload.pc), Signal(INSTRUCTION)
        s1_early, s1_memory_out = Signal(ErrorCode), Signal()
        s1_used = {f: Signal(name=f"s1_used_{f}") for f in ROW_FIELDS}
        s1_bytes = {f: Signal(34, name=f"s1_bytes_{f}") for f in ROW_FIELDS}
        with m.If(self.flush):
            m.d.sync += [s1_valid.eq(0), self.o.valid.eq(0)]
        with m.Elif(advance):
            m.d.sync += [s1_valid.eq(self.i.valid), s1_pc.eq(self.i.payload.pc), s1_word.eq(word),
                         s1_early.eq(early), s1_memory_out.eq(memory & (address + r.n > 2 ** p.address_bits))]
            for f in ROW_FIELDS:
                m.d.sync += [s1_used[f].eq(used[f]), s1_bytes[f].eq((outer[f] * inner[f]) << shift[f])]

        # Stage 2: operands inside the buffer, then the error in the documented order.
        offset_bits = exact_log2(p.row_bytes)
        outside = Cat(*(s1_used[f] & (getattr(s1_word.r, f) + ((s1_bytes[f] + p.row_bytes - 1) >> offset_bits)
                                      > 2 ** p.buffer_address_bits) for f in ROW_FIELDS)).any()
        error = Mux(s1_early != ErrorCode.NONE, s1_early,
                    Mux(outside, ErrorCode.BUFFER_RANGE, Mux(s1_memory_out, ErrorCode.MEMORY_RANGE, ErrorCode.NONE)))
        with m.If(~self.flush & advance):
            m.d.sync += [self.o.valid.eq(s1_valid), self.o.payload.pc.eq(s1_pc), self.o.payload.word.eq(s1_word),
                         self.o.payload.error.eq(error)]
        return m

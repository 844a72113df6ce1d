"""Data processing block (StreamDQ §3.5–3.6): S/Z buffer data, splitting stage and the FP32 lanes.

Memory responses arrive in request order together with the head of the tag history buffer that says what
each one is. An S/Z fill is written into its buffer line. A GPU read's beat is held in the splitting stage,
which feeds `lanes` elements per cycle into the datapath: 4 cycles for INT4, 2 for INT8/FP8, 1 for bypass,
so the response port carries one 512-bit beat per cycle whatever the mode. Each lane computes
`narrow((f32(x) − f32(z)) · f32(s))` with the `rtl.fp` datapaths.

One-beat pass-through responses (bypass and reserved-tag reads, store acknowledgements) need no lane. Such a
beat takes the short path, one register beside the datapath, when nothing older is in the datapath (the
splitting stage and every stage empty) and that register is free or delivering: then everything older has been
delivered or sits in that register, so it cannot overtake. Otherwise it travels beside the lanes, unchanged, as
every beat did before. The register, when full, always holds the oldest beat not yet delivered, so `gpu_resp`
shows it first and the datapath waits behind it: responses stay in GPU-request order. A run of pass-through
beats after a dequantized read therefore takes the long path until the datapath has emptied.
"""
from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..fp.add import FP32Add, fp32_add
from ..fp.convert import FP32Narrow, ToFP32, fp32_narrow, to_fp32
from ..fp.formats import BF16, FP8_E4M3, FP16
from ..fp.multiply import FP32Mul, fp32_mul
from ..pipeline import Stages
from .int_lut import IntLUT, sign_extend_int4
from .params import DQBParams
from .ports import Kind, gpu_response, history_entry, mc_response
from .tags import decode

# Stages from the splitting stage's output to the response register: select, convert, add, multiply, narrow.
DATAPATH_STAGES = 1 + ToFP32.latency + FP32Add.latency + FP32Mul.latency + FP32Narrow.latency


def delayed(m: Module, advance: Value, value: Value, stages: int, name: str) -> Value:
    """`value` through `stages` registers that move with the pipeline."""
    for stage in range(stages):
        register = Signal(value.shape(), name=f"{name}_d{stage + 1}")
        with m.If(advance):
            m.d.sync += register.eq(value)
        value = register
    return value


class DataProcessing(wiring.Component):
    """`history` + `mc_resp` → `gpu_resp`. From a GPU read's data accepted to its first response beat:
    `latency` cycles (the splitting stage, then the lanes); `bypass_latency` for a pass-through beat on the
    short path (an empty datapath); one response beat per cycle without back-pressure, whatever the mode."""

    latency = 1 + DATAPATH_STAGES
    bypass_latency = 1

    def __init__(self, params: DQBParams) -> None:
        self.params = p = params
        super().__init__({
            "history": In(stream.Signature(history_entry(p))),
            "mc_resp": In(stream.Signature(mc_response(p))),
            "gpu_resp": Out(stream.Signature(gpu_response(p))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        head = self.history.payload
        advance = Signal()
        # The short path's register, when full, holds the oldest beat: the datapath's output waits behind it.
        short = Signal(gpu_response(p), name="short")
        short_valid = Signal()
        valid = Signal()
        m.d.comb += advance.eq(~valid | (self.gpu_resp.ready & ~short_valid))

        # S/Z buffer data: one beat per line; read when a GPU read enters the splitting stage.
        m.submodules.scales = scales = memory.Memory(shape=p.interface_bits, depth=p.sz_lines, init=[])
        m.submodules.zeros = zeros = memory.Memory(shape=p.interface_bits, depth=p.sz_lines, init=[])
        scale_write, zero_write = scales.write_port(), zeros.write_port()
        scale_read, zero_read = scales.read_port(), zeros.read_port()

        # Splitting stage.
        held = Signal()
        part = Signal(2)
        beat = Signal(p.interface_bits)
        read = Signal(history_entry(p))
        flags = decode(read.tag)
        parts = Mux(flags.int4, 4, Mux(flags.dequantize, 2, 1))
        last = part == parts - 1
        can_load = ~held | (advance & last)
        fill = head.kind != Kind.GPU
        head_flags = decode(head.tag)
        stage_valid = [held]
        for stage in range(DATAPATH_STAGES):
            stage_valid.append(delayed(m, advance, stage_valid[-1], 1, f"valid{stage + 1}"))
        m.d.comb += valid.eq(stage_valid[-1])
        # A pass-through beat (bypass, reserved tag, store acknowledgement) goes the short way when nothing older
        # is in the datapath and the short register is free or delivering (the module's docstring says why).
        to_short = Signal()
        m.d.comb += to_short.eq(~fill & ~head_flags.dequantize & self._nothing_older(stage_valid)
                                & (~short_valid | self.gpu_resp.ready))
        m.d.comb += [
            self.mc_resp.ready.eq(self.history.valid & (fill | to_short | can_load)),
            self.history.ready.eq(self.mc_resp.valid & self.mc_resp.ready),
        ]
        accepted = self.history.ready
        load = accepted & ~fill & ~to_short
        with m.If(self.gpu_resp.ready):
            m.d.sync += short_valid.eq(0)
        with m.If(accepted & to_short):
            m.d.sync += [short_valid.eq(1), short.is_write.eq(head.is_write), short.error.eq(head_flags.reserved),
                         short.data.eq(Mux(head.is_write, 0, self.mc_resp.payload.data))]
        m.d.comb += [
            scale_write.addr.eq(head.scale_line), scale_write.data.eq(self.mc_resp.payload.data),
            scale_write.en.eq(accepted & (head.kind == Kind.SCALE)),
            zero_write.addr.eq(head.zero_line), zero_write.data.eq(self.mc_resp.payload.data),
            zero_write.en.eq(accepted & (head.kind == Kind.ZERO)),
            scale_read.addr.eq(head.scale_line), scale_read.en.eq(load),
            zero_read.addr.eq(head.zero_line), zero_read.en.eq(load),
        ]
        with m.If(held & advance):
            m.d.sync += part.eq(part + 1)
            with m.If(last):
                m.d.sync += held.eq(0)
        with m.If(load):
            m.d.sync += [held.eq(1), part.eq(0), beat.eq(self.mc_resp.payload.data), read.eq(head)]

        stages = Stages(m, advance)
        selected = self._select(stages, flags, part, beat, read, scale_read.data, zero_read.data)
        m.submodules.int8_lut = lut = IntLUT(lookups=2 * p.lanes)  # x and z of every lane
        outputs = [self._lane(m, stages.fork(), lut, selected, k) for k in range(p.lanes)]
        stages.require_depth(DATAPATH_STAGES, self)

        control = Cat(read.table_miss | read.is_write, ~flags.dequantize, flags.reserved | read.table_miss,
                      flags.bf16, read.is_write)
        control = delayed(m, advance, control, DATAPATH_STAGES, "control")
        raw = delayed(m, advance, beat, DATAPATH_STAGES, "raw")
        zero_out, pass_through, error, bf16, is_write = (control[k] for k in range(5))
        dequantized = Cat(*[Mux(bf16, to_bf16, to_fp16) for to_fp16, to_bf16 in outputs])
        m.d.comb += self.gpu_resp.valid.eq(short_valid | valid)
        with m.If(short_valid):
            m.d.comb += self.gpu_resp.payload.eq(short)
        with m.Else():
            m.d.comb += [
                self.gpu_resp.payload.data.eq(Mux(zero_out, 0, Mux(pass_through, raw, dequantized))),
                self.gpu_resp.payload.error.eq(error), self.gpu_resp.payload.is_write.eq(is_write),
            ]
        return m

    def _nothing_older(self, stage_valid: list[Value]) -> Value:
        """No beat in the splitting stage or the datapath: a pass-through beat may take the short path."""
        return ~Cat(*stage_valid).any()

    def _select(self, stages: Stages, flags, part, beat, read, scale_line, zero_line):
        """Stage 1: each lane's weight, scale and zero-point bits for element `lanes · part + lane`."""
        p = self.params
        beat_shift = exact_log2(p.beat_bytes)
        nibbles = beat.word_select(part, 4 * p.lanes)
        bytes_ = beat.word_select(part[0], 8 * p.lanes)
        values = {"fp8": flags.fp8, "bf16": flags.bf16}
        for k in range(p.lanes):
            element = part * p.lanes + k
            group = (read.offset + Mux(flags.int4, element >> 1, element)) >> read.log2_group_width
            zero_byte = zero_line.word_select(group[:beat_shift], 8)
            zero_nibble = zero_line.word_select(group[:beat_shift + 1], 4)
            values[f"x{k}"] = Mux(flags.int4, sign_extend_int4(nibbles.word_select(k, 4)), bytes_.word_select(k, 8))
            values[f"z{k}"] = Mux(flags.int4, sign_extend_int4(zero_nibble), zero_byte)
            values[f"s{k}"] = scale_line.word_select(group[:beat_shift - 1], 16)
        return stages(**values)

    def _lane(self, m: Module, lane: Stages, lut: IntLUT, selected, k: int) -> tuple[Value, Value]:
        """Stages 2 to `DATAPATH_STAGES` of lane `k`: exact conversions, x − z, · s, narrow to FP16 and to BF16."""
        def to_f32(code: Value, port: int) -> Value:
            m.d.comb += lut.codes[port].eq(code)
            return Mux(selected.fp8, to_fp32(FP8_E4M3, code), lut.values[port])
        s = getattr(selected, f"s{k}")
        converted = lane(
            x=to_f32(getattr(selected, f"x{k}"), 2 * k),
            negated_z=to_f32(getattr(selected, f"z{k}"), 2 * k + 1) ^ (1 << 31),  # x − z is x + (−z), exactly
            s=Mux(selected.bf16, to_fp32(BF16, s), to_fp32(FP16, s)),
        )
        difference = fp32_add(lane, converted.x, converted.negated_z)
        scale = delayed(m, lane.advance, converted.s, FP32Add.latency, f"lane{k}_scale")
        product = fp32_mul(lane, difference, scale)
        return (fp32_narrow(lane.fork(), product, FP16, self.params.rounding),
                fp32_narrow(lane.fork(), product, BF16, self.params.rounding))

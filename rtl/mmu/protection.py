"""The PNM LSU's checks before anything is issued (§4.2, §5.3): model parameters are read-only for the PNM,
and every access must lie inside the configured memory and be well formed. Also the request arithmetic of a
tensor: how many requests it needs, and which bytes of each it covers."""
from amaranth.hdl import Const, Module, Mux, Signal, Value

from .params import MMUParams
from .ports import Fault


def fault_of(m: Module, p: MMUParams, instruction, config) -> Value:
    """The `Fault` of a PNM instruction (combinational); `Fault.NONE` lets it through."""
    base, size = instruction.base, instruction.size
    end = Signal(p.address_bits + 2, name="lsu_end")
    rows_end = Signal(p.buffer_address_bits + 2, name="lsu_rows_end")
    m.d.comb += [
        end.eq(base + size),
        rows_end.eq(instruction.dest + sub_requests(p, size)),
    ]
    malformed = ((size == 0) | (size > p.max_tensor_bytes) | (base[:p.offset_bits] != 0)
                 | (rows_end > 2 ** p.buffer_address_bits))
    outside = end > config.memory_size
    # Half-open ranges [base, end) and [region base, region limit) overlap; an empty region never does.
    protected = 0
    for region_base, region_limit in zip(config.region_base, config.region_limit):
        protected |= (base < region_limit) & (end > region_base) & (region_base < region_limit)
    return Mux(malformed, Fault.MALFORMED,
               Mux(outside, Fault.OUT_OF_RANGE,
                   Mux(instruction.store & protected, Fault.PROTECTED, Fault.NONE)))


def sub_requests(p: MMUParams, size: Value) -> Value:
    """Requests a tensor of `size` bytes needs: its size rounded up to whole requests."""
    return (size + p.request_bytes - 1) >> p.offset_bits


def byte_mask(p: MMUParams, sub: Value, last: Value, tail: Value) -> Value:
    """All bytes, except in the last request of a tensor whose size is not a whole number of requests."""
    partial = (Const(1, p.request_bytes + 1) << tail) - 1
    return Mux((sub == last) & (tail != 0), partial, (1 << p.request_bytes) - 1)

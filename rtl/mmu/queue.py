"""A first-in first-out queue built inline in its parent module.

`amaranth.lib.fifo.SyncFIFO` would do, but as a submodule it becomes a Verilog module named
`<top>.<name>`, which `verilator -Wall` rejects (DECLFILENAME) under the project's waiver list; the same
queue laid out in the parent's module keeps the MMU one Verilog module.
"""
from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, ShapeLike
from amaranth.lib.memory import Memory


@dataclass
class Queue:
    w_data: Signal
    w_en: Signal
    w_rdy: Signal
    r_data: Signal
    r_en: Signal
    r_rdy: Signal


def queue(m: Module, name: str, shape: ShapeLike, depth: int) -> Queue:
    """Write when `w_en & w_rdy`, read (pop) when `r_en & r_rdy`; `r_data` is the head, readable the cycle
    after it was written. Empty after reset."""
    q = Queue(w_data=Signal(shape, name=f"{name}_w_data"), w_en=Signal(name=f"{name}_w_en"),
              w_rdy=Signal(name=f"{name}_w_rdy"), r_data=Signal(shape, name=f"{name}_r_data"),
              r_en=Signal(name=f"{name}_r_en"), r_rdy=Signal(name=f"{name}_r_rdy"))
    storage = Memory(shape=shape, depth=depth, init=[])
    m.submodules[f"{name}_storage"] = storage
    write, read = storage.write_port(), storage.read_port(domain="comb")
    produce = Signal(range(depth), name=f"{name}_produce")
    consume = Signal(range(depth), name=f"{name}_consume")
    level = Signal(range(depth + 1), name=f"{name}_level")
    pushed, popped = q.w_en & q.w_rdy, q.r_en & q.r_rdy
    m.d.comb += [
        q.w_rdy.eq(level != depth), q.r_rdy.eq(level != 0),
        write.addr.eq(produce), write.data.eq(q.w_data), write.en.eq(pushed),
        read.addr.eq(consume), q.r_data.eq(read.data),
    ]
    with m.If(pushed):
        m.d.sync += produce.eq(Mux(produce == depth - 1, 0, produce + 1))
    with m.If(popped):
        m.d.sync += consume.eq(Mux(consume == depth - 1, 0, consume + 1))
    m.d.sync += level.eq(level + pushed - popped)
    return q

"""Which of the requests that want banks this cycle get them: rotating priority, one access per bank."""
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out


class BankArbiter(wiring.Component):
    """`want[p]`: port p has a request it may issue; `banks[p]`: the banks it needs. `grant[p]`: it issues now.

    Ports are considered in priority order, each granted if none of its banks went to a port before it; the
    first place in the order rotates by one every cycle, whatever was granted. So a port that wants is granted
    within `ports` cycles even if every other port wants the same banks every cycle, and a conflict is a stall,
    never two accesses to one bank."""

    def __init__(self, ports: int, banks: int) -> None:
        self.port_count, self.bank_count = ports, banks
        super().__init__({"want": In(ports), "banks": In(data.ArrayLayout(banks, ports)), "grant": Out(ports)})

    def elaborate(self, platform) -> Module:
        m = Module()
        n = self.port_count
        first = Signal(range(n), name="first")
        m.d.sync += first.eq(Mux(first == n - 1, 0, first + 1))
        with m.Switch(first):
            for start in range(n):
                with m.Case(start) if start < n - 1 else m.Default():
                    taken = Const(0, self.bank_count)
                    for port in ((start + k) % n for k in range(n)):
                        needs = self.banks[port]
                        granted = self.want[port] & ~(taken & needs).any()
                        m.d.comb += self.grant[port].eq(granted)
                        taken = taken | Mux(granted, needs, 0)
        return m

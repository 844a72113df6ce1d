# amaranth: UnusedElaboratable=no
"""Build the PNM buffer under Verilator and run its cocotb bench; planted bugs (a write dropped when it loses
its bank, writes dropped without any conflict, an arbiter that lets conflicting requests share a bank) must
make the bench fail."""
import pytest
from amaranth.hdl import Module, Mux
from tests.tb.bench_runs import each_run, measure
from tests.tb.planted import always_ready, failed_tests, needs_icarus

from rtl.pnm_buffer import arbiter, buffer
from rtl.registry import BLOCKS
from basedie.flow.verify import module_runs

pytestmark = pytest.mark.verilator


@each_run("tb.pnm_buffer.bench")
def test_bench(block_name: str, config: dict) -> None:
    params, figures = measure(block_name, config)
    assert figures["latency_cycles"] == 2 and figures["initiation_interval"] == 1
    ports = params.ports
    for port in ports:
        # Alone: the port's width every cycle; all on bank 0: one grant per cycle rotating over the ports.
        assert figures[f"bytes_per_cycle_alone_{port.request}"] == port.bytes
        assert figures[f"bytes_per_cycle_one_bank_{port.request}"] == round(port.bytes / len(ports), 4)
        assert 0 < figures[f"bytes_per_cycle_uniform_{port.request}"] < port.bytes
    assert figures["max_wait_cycles_one_bank"] == len(ports)
    assert figures["max_wait_cycles_uniform"] <= len(ports)
    assert figures["bytes_per_cycle_disjoint_total"] == sum(port.bytes for port in ports)  # all fit at this size
    # 300 random reads on each of the 3 read ports, then each reads back 4 lines of 32 bytes whole.
    assert figures["vectors_checked"] == 3 * 300 + 4 * 32 // 4 + 4 * 32 // 16 + 4 * 32 // 4


def small() -> tuple[str, str, object]:
    block_name, config = module_runs("tb.pnm_buffer.bench")[0]
    return block_name, BLOCKS[block_name].bench.module, BLOCKS[block_name].params(**config)


@needs_icarus
def test_a_write_dropped_when_it_loses_a_conflict_fails_the_bench(monkeypatch, tmp_path) -> None:
    """The vector unit's writes are always accepted, and lost when the arbiter gives their bank to another
    port: the bench sees two accesses of one bank accepted in one cycle, and reads then return the old bytes.
    Alone or on disjoint banks nothing conflicts, so those tests pass."""
    monkeypatch.setitem(BLOCKS, "pnm_buffer", always_ready("pnm_buffer", "vu_wr"))
    failed = failed_tests(*small(), tmp_path)
    assert {"every_port_on_one_bank", "random_traffic"} <= failed
    assert not failed & {"each_port_alone", "every_port_on_disjoint_banks"}, failed


@needs_icarus
def test_writes_dropped_by_a_bank_fail_the_bench_on_their_data(monkeypatch, tmp_path) -> None:
    """Every bank ignores writes to its odd words: nothing conflicts that should not, so only the data can
    show it (reads return the old bytes), in every test that reads what it wrote."""
    elaborate = buffer.Bank.elaborate

    def odd_words_dropped(self, platform) -> Module:
        m = elaborate(self, platform)
        write = m.submodules["memory"].write_ports[0]
        m.d.comb += write.en.eq(Mux(self.word[0], 0, self.enable))  # overrides the real bank's enable
        return m

    monkeypatch.setattr(buffer.Bank, "elaborate", odd_words_dropped)
    failed = failed_tests(*small(), tmp_path)
    assert {"every_port_on_one_bank", "random_traffic"} <= failed


@needs_icarus
def test_an_arbiter_that_lets_conflicting_requests_share_a_bank_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Every request is granted at once: a bank takes one port's word, the other read gets that word's (stale
    or foreign) bytes and the other write is lost. Alone nothing conflicts, so that test passes."""
    def grant_everything(self, platform) -> Module:
        m = Module()
        m.d.comb += self.grant.eq(self.want)
        return m

    monkeypatch.setattr(arbiter.BankArbiter, "elaborate", grant_everything)
    failed = failed_tests(*small(), tmp_path)
    assert {"every_port_on_one_bank", "random_traffic", "every_port_on_random_rows"} <= failed
    assert "each_port_alone" not in failed, failed

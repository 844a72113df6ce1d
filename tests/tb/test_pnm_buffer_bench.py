# amaranth: UnusedElaboratable=no
"""Build the PNM buffer under Verilator and run its cocotb bench; planted bugs (a write dropped when it
conflicts, an arbiter that lets conflicting requests share a bank) must make the bench fail."""
import pytest

from rtl.registry import BLOCKS
from tb.benches import BENCHES
from tb.runner import BenchFailed, run_bench
from tb.verify import module_runs, run_ids

pytestmark = pytest.mark.verilator

RUNS = module_runs("tb.pnm_buffer.bench")


@pytest.mark.parametrize("block_name,config", RUNS, ids=run_ids(RUNS))
def test_bench(block_name: str, config: dict) -> None:
    params = BLOCKS[block_name].params(**config)
    figures = run_bench(block_name, BENCHES[block_name].module, params)
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

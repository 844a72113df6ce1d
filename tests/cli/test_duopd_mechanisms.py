"""The DuoPD study's mechanism column: which claims agree with the paper, the what-ifs the sensitivity reruns
apply, and the column's text built from a figure rerun under the claim's what-if (a stand-in figure, no
simulation)."""
from dataclasses import replace

from basedie.studies import duopd
from basedie.studies.tables import Claim
from sysmodel.simulate import SimulationConfig
from sysmodel.workload import FixedBatch

CONFIG = SimulationConfig(system="duopd", model="GPT3-175B", workload=FixedBatch(1, 1024, 8))
OUT32_HIGH = "output 32 (prefill-heavy) vs PD 3:1: highest speed-up over models, inputs, batches"
QPS_PD31 = "supported QPS (TTFT at 3x its lowest-QPS value) duopd ÷ pd-3:1, max over models"


def claim(ours: float, paper: float = 1.6, relation: str = "=", text: str = OUT32_HIGH):
    return Claim("11", text, paper, ours, "ratio", "sim", relation)


def test_a_claim_agrees_within_20_percent_or_inside_the_papers_bound() -> None:
    assert claim(1.2, paper=1.0).agrees and claim(0.8, paper=1.0).agrees
    assert not claim(1.21, paper=1.0).agrees and not claim(0.79, paper=1.0).agrees
    assert claim(0.5, paper=1.0, relation="<").agrees and not claim(1.01, paper=1.0, relation="<").agrees
    assert claim(9.0, paper=5.0, relation=">").agrees and not claim(4.9, paper=5.0, relation=">").agrees
    assert not claim(0.535, paper=1.0, relation="≈").agrees


def test_each_what_if_changes_what_its_flag_changes() -> None:
    what_if = {name: s.change for name, s in duopd.SENSITIVITIES.items()}
    assert what_if["allreduce-overlap"](CONFIG).overlap is True
    assert what_if["roofline-efficiency"](CONFIG).perf_model == "roofline-efficiency"
    # HBM4's 48 GB stacks (DuoPD §6.1) doubled; the 8 GPUs' 8 stacks each then hold 768 GB.
    doubled = what_if["kv-capacity-2x"](CONFIG).hardware
    assert doubled.gpu.stack.capacity_bytes == 96e9 and doubled.gpu.memory.capacity_bytes == 8 * 96e9
    assert what_if["vector-32-lanes"](CONFIG).hardware.pnm.vector_width == 32
    # Whole-prompt prefill servers get a budget; chunked prefill keeps its own chunk (None: 1K/4K by default).
    assert what_if["prefill-batched"](CONFIG).chunk_tokens == 10 ** 6
    assert what_if["prefill-batched"](replace(CONFIG, system="pd-3:1")).chunk_tokens == 10 ** 6
    assert what_if["prefill-batched"](replace(CONFIG, system="chunked")).chunk_tokens is None
    assert what_if["power-source"](replace(CONFIG, power_source="paper")).power_source == "synthesized"
    assert what_if["power-source"](replace(CONFIG, power_source="synthesized")).power_source == "paper"


def test_the_column_quotes_the_figure_rerun_under_the_claims_what_if(tmp_path) -> None:
    """A stand-in figure whose claim is 2.0 when its run overlaps all-reduces and 1.0 otherwise."""
    def figure(scale, out):
        assert out == tmp_path / "sensitivity" / "allreduce-overlap"
        return [claim(2.0 if duopd.prepared(CONFIG).overlap else 1.0)]

    [explained] = duopd.explain([claim(1.0)], {"fig11": figure}, duopd.QUICK, tmp_path)
    assert explained.mechanism == ("TP all-reduces not overlapped: TP8 prefill gains less than 2x over TP4 (reason 1); "
                                   "--allreduce-overlap: 2")
    assert not duopd.CHANGE    # the study's own runs are unchanged afterwards
    agreeing, unknown = duopd.explain([claim(1.5), claim(0.1, text="a claim with no mechanism")],
                                      {}, duopd.QUICK, tmp_path)
    assert agreeing.mechanism == "agrees (within ±20%)" and unknown.mechanism == "not explained"


def test_a_claim_can_have_one_mechanism_below_the_paper_and_another_above() -> None:
    below, above = (duopd.mechanism_of(claim(ours, paper=1.39, text=QPS_PD31)) for ours in (0.5, 2.09))
    assert below.sensitivity == "allreduce-overlap" and above.sensitivity == "kv-capacity-2x"


def test_a_fig16_claim_under_the_papers_power_has_the_mechanism_of_the_default_sources_claim() -> None:
    share = "DuoPD decode energy as % of PD 1:1 decode energy (incl. KV transfer), mean over outputs"
    default, paper = (duopd.mechanism_of(claim(20.0, paper=32.4, text=share + label))
                      for label in ("", " [paper PNM power]"))
    assert default.sensitivity == paper.sensitivity == "power-source" and default.reason == paper.reason == 7

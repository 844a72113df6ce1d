"""`sysmodel.simulate`'s own steps, each on hand-made inputs: how the instances' HBF figures combine, the shared
prefix, arrivals counted from the first, the refusal of non-finite results, the JSON-friendly config, the
progress count, the verified figures and base-die power a run names."""
import io
import logging
import math
import re
import sys
from dataclasses import replace

import pytest

from basedie.verified import VerifiedBlocks
from sysmodel import simulate as simulate_module

from sysmodel.config import SimulationConfig, resolve
from sysmodel.engine import Request
from sysmodel.errors import ConfigError
from sysmodel.quantized import Quantization
from sysmodel.simulate import (MAX_SPAN_S, Result, _base_die_power, _counted, _from_first_arrival, _hbf_summary,
                               _plain, _require_finite_summary, _require_finite_times, _used_figures,
                               _with_shared_prefix, simulate)
from sysmodel.workload import FixedBatch


def _instance(scale: float, hottest: dict, residency: dict) -> dict:
    """One instance's `HBFTier.summary()`, its traffic figures `scale` times those of the first."""
    return {"gpus": 2, "frame_cache_objects": int(10 * scale), "object_bytes": 6.0 * scale,
            "accesses": 100.0 * scale, "frame_cache_hits": 30.0 * scale, "served_without_media_read": 40.0 * scale,
            "hbf_media_read_bytes": 1000.0 * scale, "pe_cycles_per_block": 2.0 * scale,
            "kv_pe_cycles_per_block": 5.0 / scale, "stall_s": 0.5 / scale, "cooling_wait_s": 0.25 * scale,
            "throttle_residency_s": residency, "max_temperature_c": hottest}


FIRST = _instance(1.0, {"gpu": 60.0, "hbm": 75.0}, {"normal": 1.0, "light": 0.5})
SECOND = _instance(3.0, {"gpu": 70.0, "hbm": 65.0}, {"normal": 9.0, "light": 0.0})


def test_the_instances_traffic_is_summed_and_rates_taken_over_the_sums() -> None:
    summary = _hbf_summary([FIRST, SECOND])
    # Traffic and counts: 1x + 3x; rates: (30 + 90) / (100 + 300) and (40 + 120) / 400.
    assert (summary["accesses"], summary["frame_cache_hits"], summary["served_without_media_read"],
            summary["hbf_media_read_bytes"]) == (400.0, 120.0, 160.0, 4000.0)
    assert (summary["frame_cache_hit_rate"], summary["served_without_media_read_fraction"]) == (0.3, 0.4)
    assert (summary["gpus"], summary["instances"]) == (4, 2)


def test_the_worst_instance_gives_wear_stall_and_temperatures_and_the_first_its_cache_and_throttling() -> None:
    summary = _hbf_summary([FIRST, SECOND])
    # Wear, stall and cooling wait: the larger of the two, not their sum (the first's 5 and 0.5 against
    # the second's 5/3 and 1/6; the second's 6 and 0.75 against the first's 2 and 0.25).
    assert (summary["pe_cycles_per_block"], summary["kv_pe_cycles_per_block"], summary["stall_s"],
            summary["cooling_wait_s"]) == (6.0, 5.0, 0.5, 0.75)
    assert summary["max_temperature_c"] == {"gpu": 70.0, "hbm": 75.0}             # per die, the hotter
    assert (summary["frame_cache_objects"], summary["object_bytes"]) == (10, 6.0)   # the first instance's
    assert summary["throttle_residency_s"] == {"normal": 1.0, "light": 0.5}
    assert "servers" not in summary


def test_the_servers_sharing_a_tier_are_summed_role_by_role() -> None:
    servers = [{"gpu": {"accesses": 10.0, "stall_s": 1.0}, "pnm": {"accesses": 4.0, "stall_s": 0.5}},
               {"gpu": {"accesses": 20.0, "stall_s": 2.0}, "pnm": {"accesses": 8.0, "stall_s": 0.25}}]
    summary = _hbf_summary([{**FIRST, "servers": servers[0]}, {**SECOND, "servers": servers[1]}])
    assert summary["servers"] == {"gpu": {"accesses": 30.0, "stall_s": 3.0}, "pnm": {"accesses": 12.0, "stall_s": 0.75}}
    assert _hbf_summary([{**FIRST, "servers": servers[0]}])["servers"] == servers[0]     # one instance: its own


def test_no_weight_access_leaves_the_hit_rates_undefined() -> None:
    idle = {**FIRST, "accesses": 0.0, "frame_cache_hits": 0.0, "served_without_media_read": 0.0}
    summary = _hbf_summary([idle])
    assert math.isnan(summary["frame_cache_hit_rate"]) and math.isnan(summary["served_without_media_read_fraction"])
    assert summary["instances"] == 1


def _requests(*arrivals: float, input_len: int = 100) -> list[Request]:
    return [Request(i, arrival, input_len + i, 4) for i, arrival in enumerate(arrivals)]


def test_a_shared_prefix_is_prefilled_before_the_run() -> None:
    requests = _with_shared_prefix(_requests(0.0, 1.0), 99)     # prompts of 100 and 101 tokens
    assert [r.prefilled for r in requests] == [99, 99]
    assert [r.prefilled for r in _with_shared_prefix(_requests(0.0), 0)] == [0]
    with pytest.raises(ConfigError) as refused:
        _with_shared_prefix(_requests(0.0, 1.0), 100)
    assert str(refused.value) == "shared prefix of 100 tokens must be shorter than every prompt (the shortest has 100)"


def test_arrivals_beyond_the_span_are_counted_from_the_first_and_earlier_ones_kept() -> None:
    late = _from_first_arrival(_requests(1.7e9 + 2.0, 1.7e9, 1.7e9 + 0.5))
    assert [r.arrival for r in late] == [2.0, 0.0, 0.5]
    kept = _from_first_arrival(_requests(5.0, MAX_SPAN_S))          # the first at 5 s: not beyond the span
    assert [r.arrival for r in kept] == [5.0, 1e7]
    at_span = _from_first_arrival(_requests(MAX_SPAN_S, MAX_SPAN_S + 1.0))
    assert [r.arrival for r in at_span] == [1e7, 1e7 + 1.0]         # the first exactly at the span: kept too


def test_arrivals_spanning_more_than_the_resolution_allows_are_refused() -> None:
    assert [r.arrival for r in _from_first_arrival(_requests(0.0, MAX_SPAN_S))] == [0.0, 1e7]
    with pytest.raises(ConfigError) as refused:
        _from_first_arrival(_requests(0.0, 2e7))
    assert str(refused.value) == "arrivals span 2e+07 s; at most 1e+07 s (116 days) keeps nanosecond time resolution"
    with pytest.raises(ConfigError):
        _from_first_arrival(_requests(-math.inf, 0.0))


def test_a_request_without_a_finite_first_token_or_finish_is_refused() -> None:
    done = _requests(0.0, 0.0)
    for request in done:
        request.first_token, request.finish = 1.0, 2.0
    _require_finite_times(done)
    for field in ("first_token", "finish"):
        broken = _requests(0.0, 0.0)
        for request in broken:
            request.first_token, request.finish = 1.0, 2.0
        setattr(broken[1], field, math.inf)
        with pytest.raises(ConfigError) as refused:
            _require_finite_times(broken)
        assert str(refused.value).startswith("request 1 got no finite completion time")


def _summary(**changes) -> dict:
    return {"makespan_s": 1.0, "throughput": {"requests_per_s": 2.0}, "ttft_s": {"p50": 0.1, "p99": 0.2},
            "e2e_s": {"p50": 0.5}, "energy_j": {"total": 3.0}, "tpot_s": {"p50": math.nan}, **changes}


def test_an_infinite_aggregate_is_refused_by_its_path_and_an_undefined_one_only_where_every_run_defines_it() -> None:
    _require_finite_summary(_summary())                    # TPOT undefined (one-token outputs): allowed
    with pytest.raises(ConfigError) as infinite:
        _require_finite_summary(_summary(utilization={"by_server": {"gpu": {"busy": -math.inf}}}))
    assert str(infinite.value) == ("the result utilization.by_server.gpu.busy is -inf: some rate in the hardware "
                                   "or model is effectively zero")
    with pytest.raises(ConfigError) as top:
        _require_finite_summary(_summary(makespan_s=math.inf))
    assert str(top.value).startswith("the result makespan_s is inf:")
    for key, value in (("makespan_s", math.nan), ("ttft_s", {"p50": math.nan}), ("energy_j", {"total": math.nan}),
                       ("throughput", {"requests_per_s": math.nan}), ("e2e_s", {"p99": math.nan})):
        with pytest.raises(ConfigError) as undefined:
            _require_finite_summary(_summary(**{key: value}))
        assert str(undefined.value) == f"the result {key} is not a finite number"


class _Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


def test_a_config_is_made_of_json_values() -> None:
    value = {"a": (1, 2.5, ("x", None)), "b": {"c": [True, _Opaque()]}, "d": "text"}
    assert _plain(value) == {"a": [1, 2.5, ["x", None]], "b": {"c": [True, "Opaque()"]}, "d": "text"}
    assert _plain(_Opaque()) == "Opaque()" and _plain(None) is None


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_passes_each_request_on_and_counts_it(monkeypatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    submitted = []
    submit = _counted(submitted.append, 3)
    requests = _requests(0.0, 1.0)
    for request in requests:
        submit(request)
    assert submitted == requests and (submit.bar.n, submit.bar.total) == (2, 3)
    submit.bar.close()
    shown = terminal.getvalue()
    assert shown.startswith("\rarrived:   0%|") and "| 2/3 [" in shown and shown.endswith("request/s]\n")


def test_progress_is_not_shown_off_a_terminal(monkeypatch) -> None:
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    submit = _counted(lambda request: None, 1)
    submit(_requests(0.0)[0])
    submit.bar.close()
    assert log.getvalue() == ""


def test_a_results_rows_are_its_requests_latencies() -> None:
    request = Request(7, 1.0, 10, 3, prefill_start=1.5, first_token=2.0, finish=3.0, decode_ready=2.0,
                      decode_start=2.25)
    assert Result({}, [request], {}).rows == [{"id": 7, "arrival_s": 1.0, "input_len": 10, "output_len": 3,
                                               "queue_s": 0.5, "ttft_s": 1.0, "tpot_s": 0.5, "e2e_s": 2.0,
                                               "decode_queue_s": 0.25}]
    assert Result({}, [], {}).temperatures == []


def _setting(system: str, quantization: Quantization = Quantization(), power_source: str = "synthesized"):
    return resolve(SimulationConfig(system=system, model="llama2-70b", workload=FixedBatch(1, 128, 2),
                                    quantization=quantization, power_source=power_source))


def _recorded(table, name: str, params: dict) -> str:
    """The sources digest of the table's one `name` entry with `params`."""
    (entry,) = [e for e in table.entries if e.block == name and e.params == params]
    return entry.provenance["sources_digest"]


def test_a_pnm_run_names_the_verified_pnm_and_mmu_entries_it_rests_on() -> None:
    setting = _setting("duopd")
    used = _used_figures(setting)
    # DuoPD's PNM: 1,024-wide lanes of 128-wide sublanes, 16 lanes, at 1 GHz; the table's vector unit is 2 wide,
    # not the system's 128, so the adder that scales its reduction tree is named too; the in-order MMU.
    assert list(used) == ["pnm_lane", "pnm_array", "pnm_vector", "mmu", "fp32_add"]
    assert used["pnm_lane"]["params"] == {"width": 1024, "sublane_width": 128, "design_clock_hz": 1e9}
    assert used["pnm_array"]["params"]["lanes"] == 16 and used["pnm_vector"]["params"] == {"width": 2}
    assert used["mmu"]["params"]["out_of_order"] is False and used["fp32_add"]["params"] == {}
    for name, figures in used.items():
        assert figures["sources_digest"] == _recorded(setting.table, name, figures["params"])


def test_quantized_weights_name_the_dqb_and_the_base_die_when_it_measured_the_scales_share() -> None:
    assert _used_figures(_setting("gpu")) == {}
    dqb = _used_figures(_setting("gpu", Quantization("w4a16", 128, "dqb")))
    assert list(dqb) == ["dqb"] and dqb["dqb"]["params"]["interface_bits"] == 512
    pnm = _used_figures(_setting("duopd", Quantization("w4a16", 128, "dqb")))
    assert list(pnm) == ["pnm_lane", "pnm_array", "pnm_vector", "mmu", "fp32_add", "dqb"]
    # Groups of 32: the DQB bench measured no such S/Z share, the base die's decode layer did.
    small_groups = _setting("gpu", Quantization("w4a16", 32, "dqb"))
    used = _used_figures(small_groups)
    assert list(used) == ["dqb", "base_die"]
    assert used["base_die"]["sources_digest"] == _recorded(small_groups.table, "base_die", used["base_die"]["params"])


def test_a_runs_base_die_power_names_its_source_and_only_the_logic_it_priced() -> None:
    setting = _setting("duopd", power_source="paper")
    assert _base_die_power(setting) == {"source": "paper"}        # nothing priced yet
    pnm = setting.pnm_power
    assert _base_die_power(setting) == {"source": "paper", "pnm_power": pnm.as_dict()}
    assert pnm.as_dict()["watts"] == 6.45                         # DuoPD §6.7's PNM per stack
    dqb = setting.dqb_power
    assert _base_die_power(setting) == {"source": "paper", "pnm_power": pnm.as_dict(), "dqb_power": dqb.as_dict()}
    assert dqb.as_dict()["watts"] == 0.355                        # StreamDQ Table 5's DQB


SMALL = {"system": "chunked", "model": "llama2-70b", "workload": FixedBatch(7, 256, 4)}


def test_a_run_shows_no_progress_unless_asked_and_logs_what_it_simulated(monkeypatch, caplog) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with caplog.at_level(logging.INFO, logger="sysmodel.simulate"):
        simulate(SimulationConfig(**SMALL))
    assert terminal.getvalue() == ""
    (message,) = [r.getMessage() for r in caplog.records if "simulated in" in r.getMessage()]
    seconds = re.fullmatch(r"chunked: 7 requests on LLaMA2-70B simulated in (\d+\.\d\d) s", message)
    assert seconds and float(seconds[1]) < 60                 # the run's own time, not a clock reading


def test_requests_a_system_never_finishes_are_an_error_naming_the_first_five(monkeypatch) -> None:
    built = simulate_module.build

    def idle(*args):
        system = built(*args)
        system.submit = lambda request: None                   # accepts each request and never serves it
        return system
    monkeypatch.setattr(simulate_module, "build", idle)
    with pytest.raises(RuntimeError) as never:
        simulate(SimulationConfig(**SMALL))
    assert str(never.value) == "7 requests never finished (first: [0, 1, 2, 3, 4])"


def test_a_run_checks_its_shared_prefix_and_reads_the_table_it_is_given() -> None:
    with pytest.raises(ConfigError) as prefix:
        simulate(SimulationConfig(**SMALL, shared_prefix_tokens=256))
    assert str(prefix.value) == "shared prefix of 256 tokens must be shorter than every prompt (the shortest has 256)"
    with pytest.raises(ConfigError) as empty:
        simulate(SimulationConfig(**{**SMALL, "system": "duopd"}), VerifiedBlocks([]))
    assert str(empty.value) == "no verified figures for mmu with {'out_of_order': False}; run `basedie verify mmu`"


def test_the_utilization_peaks_are_both_machines_of_a_pd_deployment(monkeypatch) -> None:
    peaks = []
    summarize = simulate_module.summarize

    def recorded(requests, accounts, energy_per_bit, flops, bandwidth):
        peaks.append((flops, bandwidth))
        return summarize(requests, accounts, energy_per_bit, flops, bandwidth)
    monkeypatch.setattr(simulate_module, "summarize", recorded)
    simulate(SimulationConfig(system="pd-1:1", model="llama2-7b", workload=FixedBatch(2, 256, 4),
                              hardware="h100-sxm5-80gb", decode_hardware="a100-sxm4-80gb"))
    # 8 H100s (989.4 TFLOP/s dense BF16, 3.35 TB/s) prefill, 8 A100s (312 TFLOP/s, 2.039 TB/s) decode.
    assert peaks == [(pytest.approx(8 * 989.4e12 + 8 * 312e12), pytest.approx(8 * 3.35e12 + 8 * 2.039e12))]


def test_a_vector_unit_of_the_verified_width_needs_no_adder_entry() -> None:
    setting = _setting("duopd")
    two_wide = replace(setting.hardware, pnm=replace(setting.hardware.pnm, vector_width=2))   # the bench's width
    used = _used_figures(resolve(replace(setting.config, hardware=two_wide)))
    assert list(used) == ["pnm_lane", "pnm_array", "pnm_vector", "mmu"]


def test_a_deployment_too_large_for_the_machine_is_refused_by_its_name() -> None:
    with pytest.raises(ConfigError) as refused:
        simulate(SimulationConfig(**{**SMALL, "system": "colocated:4x4"}))
    assert str(refused.value) == "colocated:4x4 needs 16 GPUs, the hardware has 8"


def test_a_runs_config_records_what_ran_and_how() -> None:
    config = simulate(SimulationConfig(system="pd-1:1", model="llama2-7b", workload=FixedBatch(2, 256, 4),
                                       hardware="h100-sxm5-80gb", decode_hardware="a100-sxm4-80gb", max_batch=8,
                                       overlap=True, iteration_overhead_s=2e-5)).config
    assert list(config) == ["system", "system_spec", "model", "workload", "hardware", "max_batch", "perf_model",
                            "all_reduce", "allreduce_overlap", "iteration_overhead_s", "decode_hardware", "mmu_policy",
                            "chunk_tokens", "quantization", "verified_blocks", "memory", "shared_prefix_tokens",
                            "base_die_power"]
    assert (config["system"], config["system_spec"]) == (
        "pd-1:1", "Disaggregated(prefill_instances=1, prefill_tp=4, decode_instances=1, decode_tp=4)")
    assert config["model"]["name"] == "Llama-2-7B"
    assert config["workload"] == {"kind": "FixedBatch", "requests": 2, "input_len": 256, "output_len": 4}
    assert (config["hardware"]["gpu"]["name"], config["decode_hardware"]["gpu"]["name"]) == (
        "H100-SXM5-80GB", "A100-SXM4-80GB")
    assert [config[key] for key in ("max_batch", "perf_model", "all_reduce", "allreduce_overlap",
                                    "iteration_overhead_s", "mmu_policy", "chunk_tokens", "verified_blocks",
                                    "memory", "shared_prefix_tokens", "base_die_power")] == [
        8, "roofline", "bandwidth", True, 2e-5, None, None, {}, "hbm", 0, {"source": "synthesized"}]
    assert config["quantization"]["weights"] == "fp16"
    chunked = simulate(SimulationConfig(**SMALL, shared_prefix_tokens=128)).config
    # A dense model's default chunk; no MMU, no second machine.
    assert (chunked["chunk_tokens"], chunked["mmu_policy"], chunked["decode_hardware"]) == (1024, None, None)
    assert chunked["shared_prefix_tokens"] == 128
    assert simulate(SimulationConfig(**{**SMALL, "system": "duopd"})).config["mmu_policy"] == "prefill-first"


def test_a_run_with_weights_in_hbf_reports_the_tier_and_its_temperatures() -> None:
    result = simulate(SimulationConfig(system="chunked", model="llama2-7b", workload=FixedBatch(2, 256, 4),
                                       memory="C"))
    hbf = result.summary["hbf"]
    assert (hbf["instances"], hbf["gpus"]) == (1, 8) and hbf["accesses"] > 0 and hbf["hbf_media_read_bytes"] > 0
    assert result.config["memory"]["name"] == "C" and result.config["memory"]["weights"] == "hbf"
    assert list(result.config["hbf"])[-2:] == ["stack", "provenance"] and result.config["hbf"]["provenance"]
    assert result.temperatures and all(len(row) == 5 for row in result.temperatures)
    times = [row[0] for row in result.temperatures]
    assert times == sorted(times) and times[-1] == pytest.approx(result.summary["makespan_s"], rel=1e-12)

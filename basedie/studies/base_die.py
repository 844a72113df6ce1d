"""The composed base-die study (issue 31, item 4): PD on GPUs, DuoPD, StreamDQ's DQBs and HBF layout C, alone and
composed, on the same requests.

    basedie study base-die [--out DIR] [--quick] [--slo-ms X] [--doc PATH]

Per model and row: TPOT and TTFT p50 and energy per output token at a common load (the PNMs' and DQBs' power from
the synthesis table, the default, and from the papers, `--power-source paper`), the HBF media bytes read, and
the largest rate of the QPS grid at which TPOT p99 stays within the SLO (the sweep stops at the first rate that
misses it), and the KV tokens the decode side holds (the longest context × batch that fits). Writes `rows.csv` (every simulation), `headline.csv` + `headline.md` and `tpot.png` to
build/study/base_die/; `--doc` also writes the headline with its command into a Markdown page. A row the model
refuses keeps its one-line reason and no numbers. Nothing is fitted: the model lives in `sysmodel/`, this only
sweeps it.
"""
import argparse
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from basedie import verified
from basedie.studies.tables import cell, replace_section, write_csv
from basedie.verified import StaleTableError, project_root
from rtl.pnm.params import PNMParams
from sysmodel.errors import ConfigError
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.hbf.layout import resolve_layout
from sysmodel.hbf.media import PAGE_BYTES
from sysmodel.power import PNM_PARTS, block_entry, dqb_power, pnm_power
from sysmodel.quantized import Quantization
from sysmodel.servers import KVDoesNotFit
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import FixedBatch, PoissonArrivals

W4A16_DQB = Quantization("w4a16", 128, "dqb", None)
# Layout C with the KV cache and a shared prefix in HBF as well (no HBM region for them: read from flash every step).
C_KV = "examples/layouts/C-kv.toml"
PREFIX_TOKENS = 1024          # the shared prefix of the prefix row: half of every prompt
C_KV_DQB = {"system": "duopd", "quantization": W4A16_DQB,
            "memory": resolve_layout(str(project_root() / C_KV))}
# (row name, the `basedie simulate` flags it stands for, SimulationConfig fields). `duopd --memory C` (FP16 weights
# in HBF) is the reference that shows what the DQB's smaller weights do to the flash traffic.
ROWS = (("pd-1:1", "--system pd-1:1", {"system": "pd-1:1"}),
        ("duopd", "--system duopd", {"system": "duopd"}),
        ("duopd+dqb", "--system duopd --weights w4a16 --dequant dqb", {"system": "duopd", "quantization": W4A16_DQB}),
        ("duopd+dqb+C", "--system duopd --weights w4a16 --dequant dqb --memory C",
         {"system": "duopd", "quantization": W4A16_DQB, "memory": "C"}),
        ("duopd+dqb+C+kv", f"--system duopd --weights w4a16 --dequant dqb --memory {C_KV}", C_KV_DQB),
        ("duopd+dqb+C+kv+prefix",
         f"--system duopd --weights w4a16 --dequant dqb --memory {C_KV} --shared-prefix-tokens {PREFIX_TOKENS}",
         {**C_KV_DQB, "shared_prefix_tokens": PREFIX_TOKENS}),
        ("duopd+C", "--system duopd --memory C", {"system": "duopd", "memory": "C"}),
        ("gpu+dqb", "--system gpu --weights w4a16 --dequant dqb", {"system": "gpu", "quantization": W4A16_DQB}),
        ("gpu+C", "--system gpu --memory C", {"system": "gpu", "memory": "C"}))
# MLPerf Inference's interactive Llama-2-70B server scenario: TPOT <= 40 ms at the 99th percentile
# (github.com/mlcommons/inference, loadgen/mlperf.conf: `llama2-70b-interactive.Server.tpot_latency = 40`,
# `*.Server.target_latency_percentile = 99`); applied to all three models, as no benchmark sets one for the others.
SLO_MS = 40.0
INPUT_LEN, OUTPUT_LEN, CV, SEED = 2048, 128, 0.1, 0


def base_die_logic(fields: dict) -> tuple[float, float]:
    """(mm², W) of one HBM stack's base-die logic in a row, composed from the same synthesized parts the energy
    column's power comes from (`sysmodel.power`): the PNM where decode runs on the PNMs (one per stack, DuoPD
    §4.2: `pnm_parts`), and one DQB per pseudo-channel where they dequantize (`power.DQB`, scaled to Table 5's).
    The paper-size PNM top and Table 5's DQB are not synthesized whole (docs/results/ppa.md). Memories count as
    SRAM bit cells. (0, 0) for a row without base-die logic; NaN where a part is not in the table."""
    quantization = fields.get("quantization")
    try:
        powers = [(1, pnm_power("synthesized", PAPER_HARDWARE.pnm))] if fields["system"] == "duopd" else []
        if quantization is not None and quantization.dequant == "dqb":
            powers.append((PAPER_HARDWARE.gpu.pseudo_channels_per_stack, dqb_power("synthesized")))
        area_um2 = sum(n * part["count"] * block_entry(part["block"], **part["params"])["figures"]["area_with_sram_um2"]
                       for n, power in powers for part in power.provenance)
    except StaleTableError:
        return math.nan, math.nan
    return area_um2 * 1e-6, sum(n * power.watts for n, power in powers)


@dataclass(frozen=True)
class Scale:
    models: tuple[str, ...]
    requests: int
    load_qps: float                  # the common load of the TPOT / TTFT / energy columns
    qps_grid: tuple[float, ...]      # ascending


FULL = Scale(("LLaMA2-70B", "GPT3-175B", "Qwen3-235B-A22B"), 64, 1.0, (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64))
QUICK = Scale(("LLaMA2-70B",), 16, 1.0, (0.5, 4, 32))


def run(model: str, fields: dict, scale: Scale, qps: float, table) -> dict:
    """One simulation's metrics, or its refusal."""
    config = SimulationConfig(model=model, workload=PoissonArrivals(qps, scale.requests, INPUT_LEN, OUTPUT_LEN, CV,
                                                                    SEED), **fields)
    try:
        s = simulate(config, table).summary
    except ConfigError as error:
        return {"status": str(error)}
    hbf = s.get("hbf", {})
    return {"status": "ok", "tpot_p50_ms": s["tpot_s"]["p50"] * 1e3, "tpot_p99_ms": s["tpot_s"]["p99"] * 1e3,
            "ttft_p50_ms": s["ttft_s"]["p50"] * 1e3, "energy_j_per_token": s["energy_j"]["per_output_token"],
            "flash_read_gb": (hbf.get("hbf_media_read_bytes", 0.0) + hbf.get("kv_media_read_pages", 0.0) * PAGE_BYTES)
            / 1e9}


def kv_tokens(model: str, fields: dict, table) -> int:
    """The KV tokens the decode side holds (context × batch): what a request no pool can hold is refused with."""
    config = SimulationConfig(model=model, workload=FixedBatch(1, 10**12, 1), **fields)
    try:
        simulate(config, table)
    except KVDoesNotFit as refusal:
        return refusal.capacity_tokens
    raise AssertionError(f"{model} {fields}: a 10^12-token request was not refused")


def study(scale: Scale, slo_ms: float, table) -> tuple[list[dict], list[dict]]:
    """(every simulation, one headline row per model and row)."""
    runs, headline = [], []
    for model in scale.models:
        for name, flags, fields in ROWS:
            at_load = run(model, fields, scale, scale.load_qps, table)
            runs.append({"model": model, "row": name, "qps": scale.load_qps, **at_load})
            # The papers' PNM and DQB power changes the energy alone.
            paper = run(model, {**fields, "power_source": "paper"}, scale, scale.load_qps, table)
            best = math.nan
            if at_load["status"] == "ok":
                for qps in scale.qps_grid:
                    r = at_load if qps == scale.load_qps else run(model, fields, scale, qps, table)
                    if qps != scale.load_qps:
                        runs.append({"model": model, "row": name, "qps": qps, **r})
                    if r["status"] != "ok" or r["tpot_p99_ms"] > slo_ms:
                        break
                    best = qps
            logic_mm2, logic_w = base_die_logic(fields)
            headline.append({"key": f"{model} {name}", "model": model, "row": name, "flags": flags,
                             "status": at_load["status"], "logic_mm2": logic_mm2, "logic_w": logic_w,
                             **{k: at_load.get(k, math.nan) for k in ("tpot_p50_ms", "ttft_p50_ms",
                                                                        "energy_j_per_token", "flash_read_gb")},
                             "energy_paper_j_per_token": paper.get("energy_j_per_token", math.nan),
                             "max_qps_at_slo": best,
                             "kv_tokens": kv_tokens(model, fields, table) if at_load["status"] == "ok" else math.nan})
    return runs, headline


def plot(path: Path, headline: list[dict]) -> None:
    models = list(dict.fromkeys(h["model"] for h in headline))
    figure = Figure(figsize=(5 * len(models), 4), layout="constrained")
    axes = figure.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models):
        rows = [h for h in headline if h["model"] == model]
        ax.bar([h["row"] for h in rows], [h["tpot_p50_ms"] for h in rows])
        ax.set_yscale("log")
        ax.set(title=model, ylabel="TPOT p50 (ms)")
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    figure.savefig(path, dpi=100)


def markdown(headline: list[dict], scale: Scale, slo_ms: float, command: str) -> str:
    lines = [f"Regenerate: `{command}` (writes build/study/base_die/).", "",
             f"Each model on the `paper` hardware (8 GPUs); {scale.requests} Poisson requests of {INPUT_LEN} -> "
             f"{OUTPUT_LEN} tokens (length CV {CV}, seed {SEED}). TPOT, TTFT and energy at the common load of "
             f"{scale.load_qps:g} request/s; the energy with the PNMs' and DQBs' synthesized power (the default, "
             "docs/results/ppa.md) and, beside it, with the papers' (`--power-source paper`: DuoPD's 6.45 W per stack, "
             f"StreamDQ's 0.355 W per DQB). Max QPS: the largest rate of {', '.join(f'{q:g}' for q in scale.qps_grid)}"
             f" request/s at which TPOT p99 <= {slo_ms:g} ms (`--slo-ms`; 40 ms: MLPerf Inference's interactive Llama-2-70B "
             "server scenario, loadgen/mlperf.conf); "
             "0: missed already at the lowest; >=: met at the highest. Only TPOT is constrained: in PD and DuoPD a longer "
             "prefill queue shows in TTFT, not TPOT. Flash read: bytes read from the HBF media (weights and KV). KV tokens: what the "
             "decode side's KV cache holds, the longest context × batch that fits (the batch of requests of "
             f"{INPUT_LEN + OUTPUT_LEN} tokens that fits beside it). Base-die logic: one HBM stack's, composed "
             "from the synthesized parts whose power the energy takes (docs/results/ppa.md, ASAP7, 20 % toggle rate at "
             f"the design clock): the PNM where the PNMs decode ({PAPER_HARDWARE.pnm.lanes} lanes of "
             f"{PAPER_HARDWARE.pnm.lane_width}, the vector unit scaled per lane, the buffer, the controller and the "
             f"MMU), and {PAPER_HARDWARE.gpu.pseudo_channels_per_stack} DQBs (one per pseudo-channel, each the 32-bit "
             "DQB scaled to Table 5's 512 bits) where they dequantize; memories as SRAM bit cells. The paper-size PNM "
             "top and Table 5's DQB are not synthesized whole, and the buffer part is the "
             f"{PNM_PARTS['pnm_buffer']['total_bytes'] >> 10} KiB entry (the paper's holds "
             f"{PNMParams().buffer_bytes >> 20} MiB), so the buffer's SRAM is understated; -: a part not synthesized. One row at "
             f"one rate from the command line: `basedie simulate --model MODEL FLAGS --qps X --requests {scale.requests} "
             f"--input-len {INPUT_LEN} --output-len {OUTPUT_LEN} --length-cv {CV} --seed {SEED}`.", "",
             "| model | row | flags | TPOT p50 ms | TTFT p50 ms | J / output token | J / output token, paper power "
             f"| flash read GB | max QPS | KV tokens | batch of {INPUT_LEN + OUTPUT_LEN} | base-die logic mm² "
             "| base-die logic W | status |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for h in headline:
        numbers = " | ".join("-" if math.isnan(h[k]) else f"{h[k]:.4g}" for k in (
            "tpot_p50_ms", "ttft_p50_ms", "energy_j_per_token", "energy_paper_j_per_token", "flash_read_gb"))
        best = "-" if h["status"] != "ok" else ("0" if math.isnan(h["max_qps_at_slo"]) else
                                                f"{'>= ' * (h['max_qps_at_slo'] == scale.qps_grid[-1])}"
                                                f"{h['max_qps_at_slo']:g}")
        kv = "-" if math.isnan(h["kv_tokens"]) else f"{h['kv_tokens']:,} | {h['kv_tokens'] // (INPUT_LEN + OUTPUT_LEN):,}"
        kv = kv if kv != "-" else "- | -"
        logic = " | ".join("-" if math.isnan(h[k]) else f"{h[k]:.4g}" for k in ("logic_mm2", "logic_w"))
        lines.append(f"| {h['model']} | {h['row']} | `{h['flags']}` | {numbers} | {best} | {kv} | {logic} | "
                     f"{cell(h['status'])} |")
    lines.append("")
    for model in dict.fromkeys(h["model"] for h in headline):
        # (the prefix row runs another workload: half of each prompt is already cached)
        ran = [h for h in headline if h["model"] == model and h["status"] == "ok" and "prefix" not in h["row"]]
        fastest = min(ran, key=lambda h: h["tpot_p50_ms"])
        thrifty = min(ran, key=lambda h: h["energy_j_per_token"])
        lines.append(f"- **{model}**: lowest TPOT p50 {fastest['row']} ({fastest['tpot_p50_ms']:.3g} ms), lowest "
                     f"energy {thrifty['row']} ({thrifty['energy_j_per_token']:.3g} J per output token). "
                     f"{FINDINGS.get(model, '')}".rstrip())
    lines.append(KV_FINDING)
    return "\n".join(lines) + "\n"


# Why, per model: written from the full run's rows (docs/results/base-die-study.md) and the mechanisms measured in
# docs/design/composition.md; not fitted.
FINDINGS = {
    "LLaMA2-70B": "DuoPD wins over PD 1:1 on both: decode runs on the base die's PNM lanes, which read the HBM "
                  "stacks from below, and the GPUs only prefill (TTFT falls too). The DQBs make DuoPD slower on "
                  "HBM: the 64 DQBs of a stack at their 328 MHz design clock deliver 1.34 TB/s of FP16, less than "
                  "the stack's 2.0 TB/s. On layout C they pay: a GPU's 4-bit layers fit its frame cache and FP16's "
                  "do not, so the flash read falls by four orders of magnitude and TPOT halves against FP16 on C. "
                  "Energy per token with the 4-bit weights on C is below DuoPD's on HBM: by a few per cent with the "
                  "papers' power, by more with the synthesized power, whose DQBs draw less than StreamDQ's "
                  "0.355 W each and whose PNM more than DuoPD's 6.45 W (the base-die logic columns; the mechanism "
                  "beyond the power figures is not yet traced).",
    "GPT3-175B": "As for LLaMA2-70B on HBM (DuoPD first, the DQBs' clock slows it). On layout C even the 4-bit "
                 "layers exceed a GPU's 8 GiB frame cache, so both HBF rows stay flash-bound; 4-bit reads about a "
                 "third of FP16's flash bytes, yet neither HBF row holds the 40 ms SLO even at the lowest rate. Its "
                 "energy per token is the lowest of all rows, below DuoPD's on HBM (not yet traced).",
    "Qwen3-235B-A22B": "With 22 B active parameters a decode token reads little, and PD 1:1's GPU decode is "
                       "faster per token than DuoPD's (mechanism not yet traced); DuoPD still spends about half the "
                       "energy (less than half with the papers' power). On layout C the experts cycle through the frame cache, so DuoPD reads the "
                       "media in every layer; with 4-bit experts (a quarter of the bytes plus S/Z) more of them stay "
                       "in the frame cache, the flash read falls about sevenfold and TPOT by 1.7x against FP16 on C. "
                       "On HBM the DQBs slow DuoPD, as for the dense models (their 1.34 TB/s per stack).",
}


KV_FINDING = ("- **The KV cache and a shared prefix in HBF** (the `+kv` rows, on top of duopd+dqb+C), all three models: "
              "with no HBM region for KV the PNMs read every decode step's whole context from flash through the base "
              "die, so the flash read grows (160-fold for LLaMA2-70B, whose 4-bit layers sit in the frame cache; "
              "by a half and a fifth for GPT3-175B and Qwen3-235B-A22B, which stream weights from flash already) "
              "and TPOT rises by 14-19 %, while the largest QPS within the SLO stays; in exchange the decode side holds about 55x the KV tokens (three "
              "512 GiB HBF stacks beside the weights, against what layout C's one HBM stack leaves). The prefix row "
              "prefills only the half of each prompt after the prefix, so TTFT and energy per token fall; the prefix "
              "is read from flash with every context, so TPOT does not change.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="basedie study base-die", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/study/base_die"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="LLaMA2-70B only, fewer requests and rates")
    parser.add_argument("--slo-ms", type=float, default=SLO_MS, help="TPOT p99 SLO in ms (default 40: MLPerf's interactive Llama-2-70B)")
    parser.add_argument("--doc", type=Path, help="also write the headline into this Markdown page")
    parser.add_argument("--readme", type=Path, help="also write the per-model summary between this README's markers "
                        f"({README_BEGIN} ... {README_END})")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.slo_ms) and args.slo_ms > 0):
        parser.error(f"--slo-ms must be a positive number of ms, got {args.slo_ms}")
    readme = args.readme.read_text() if args.readme else None
    if readme is not None:
        try:
            replace_section(readme, README_BEGIN, README_END, "")
        except ValueError as error:
            parser.error(f"{args.readme}: {error}")
    scale = QUICK if args.quick else FULL
    runs, headline = study(scale, args.slo_ms, verified.load())
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "rows.csv", runs)
    write_csv(args.out / "headline.csv", headline)
    plot(args.out / "tpot.png", headline)
    command = "basedie study base-die" + " --quick" * args.quick + (
        f" --slo-ms {args.slo_ms:g}" if args.slo_ms != SLO_MS else "") + (f" --doc {args.doc}" if args.doc else "") + (
        f" --readme {args.readme}" if args.readme else "")
    text = markdown(headline, scale, args.slo_ms, command)
    (args.out / "headline.md").write_text(f"# Base-die study{' (quick mode)' * args.quick}\n\n{text}")
    if args.doc:
        args.doc.write_text(DOC.format(table=text))
    if readme is not None:
        args.readme.write_text(replace_section(readme, README_BEGIN, README_END, readme_section(headline, command)))
    print(text)


README_BEGIN = "<!-- generated by basedie study base-die --readme: begin -->"
README_END = "<!-- generated by basedie study base-die --readme: end -->"


def readme_section(headline: list[dict], command: str) -> str:
    """Per model: the rows with the lowest TPOT and energy, what 4-bit weights do on layout C against FP16 there,
    and one stack's base-die logic with the PNM and the DQBs; the command that wrote it."""
    intro = (f"Written by `{command}` (the whole table and the mechanisms: "
             "[docs/results/base-die-study.md](docs/results/base-die-study.md)):")
    lines = [*textwrap.wrap(intro, 116, break_long_words=False, break_on_hyphens=False), "",
             "| model | lowest TPOT p50 | lowest energy per output token | TPOT on layout C, FP16 ÷ w4a16 + DQB "
             "| base-die logic per stack, PNM + DQBs |",
             "| --- | --- | --- | --- | --- |"]
    for model in dict.fromkeys(h["model"] for h in headline):
        rows = {h["row"]: h for h in headline if h["model"] == model}
        ran = [h for h in rows.values() if h["status"] == "ok" and "prefix" not in h["row"]]
        fastest = min(ran, key=lambda h: h["tpot_p50_ms"])
        thrifty = min(ran, key=lambda h: h["energy_j_per_token"])
        fp16, int4, logic = rows["duopd+C"], rows["duopd+dqb+C"], rows["duopd+dqb"]
        on_c = (f"{fp16['tpot_p50_ms'] / int4['tpot_p50_ms']:.2f}x" if fp16["status"] == int4["status"] == "ok"
                else "-")
        lines.append(f"| {model} | {fastest['row']}, {fastest['tpot_p50_ms']:.3g} ms | {thrifty['row']}, "
                     f"{thrifty['energy_j_per_token']:.3g} J | {on_c} | {logic['logic_mm2']:.3g} mm², "
                     f"{logic['logic_w']:.3g} W |")
    return "\n".join(lines) + "\n"


DOC = """# The composed base-die study

`basedie/studies/base_die.py` runs the base die's pieces alone and composed on the same requests: PD 1:1 on GPUs,
DuoPD (decode on the base die's PNM lanes), DuoPD with W4A16 weights dequantized by StreamDQ's DQBs, the same
with the weights stored in HBF (layout C), then with the KV cache in HBF too (`examples/layouts/C-kv.toml`: the
PNMs read every decode step's context from flash through the base die, no HBM region for KV), then with half of
every prompt a shared prefix held in HBF (`--shared-prefix-tokens 1024`: a different workload, each prompt
prefills only its other half), DuoPD with FP16 weights in HBF (reference), and one GPU with the DQBs or with HBF
(`gpu`: one GPU of the machine). Every row is one `basedie simulate` configuration (its flags are in
the table); a row the model refuses shows its reason.

{table}"""


if __name__ == "__main__":
    main()

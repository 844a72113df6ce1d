"""Write docs/results/fidelity-studies.md from the headline tables of full runs of the StreamDQ and HBF studies.

    basedie study streamdq && basedie study hbf && basedie study fidelity

Reads `build/study/streamdq/headline.md` and `build/study/hbf/headline.md` (the studies' default output
folders); refuses a quick run's tables (their points are too few to stand for the paper's figures).
"""
import argparse
from pathlib import Path

from basedie.verified import project_root

ROOT = project_root()

INTRO = """# StreamDQ and HBF against their papers

Both studies put every headline claim of their paper beside our figure, with the ratio ours ÷ paper, whether it
is within ±20 %, and, for every cell that is not, the mechanism that makes the difference and the run that shows
it (a sensitivity: the other columns, or a run named in the cell). Nothing is fitted to a paper; the one
calibration (the routing skew that brings i.i.d. routing closest to HBFSim's trace) is labelled as one and feeds
no headline.

Regenerate this page (about 3 minutes on 2 cores):

    basedie study streamdq && basedie study hbf && basedie study fidelity

## The StreamDQ study's GPU kernels: roofline or measured

`basedie simulate --weights w4a16 --dequant gpu|gpu-fused|gpu-split --kernel FAMILY --kernel-model measured`
prices the GPU's GEMM kernels from public measurements instead of their instruction-count roofline
(`--kernel-model roofline`, the default):

- fused W4A16 kernels (`--kernel gptq`, INT4, and `awq-v1`): the FP16 GEMM's measured time divided by the
  kernel's measured speed-up over FP16 at the same M (`sysmodel/data/profiles/marlin_a10_w4a16_speedup.csv`,
  read off Marlin's published benchmark, Apache-2.0; its README gives source and method);
- the FP16 GEMM (the DQB path's, the split kernel's and the baseline): this GPU's roofline over the efficiency
  Vidur's profiles measured for the nearest shape (as `--perf-model roofline-efficiency` does);
- split kernels: a dequantization pass at the best measured bandwidth efficiency, then that FP16 GEMM.

A kernel nobody published timings of (AWQ-v2, INT8 GPTQ) is refused under `measured` with a message naming it.
Marlin's A10 benchmark is the one per-M measurement of the paper's INT4 kernels found (public issue threads and
benchmark repositories searched for exllama, GPTQ, AWQ and Marlin timings at M = 1-128 on an A100: those published
are single M = 1 points, end-to-end token rates, or other GPUs). Fig. 16's crossover is given twice: at the
figure's powers of two, as the paper gives it (its grid places its own crossover in (4, 8]), and at every integer M
(`overtakes_from` in `sysmodel/quantized.py`).

## HBF: the inputs the paper gives, and the prefetch trace

The HBFSim paper states no thermal resistance, capacitance or die power: §6.3 reports the limit powers as
results of its reconstructed operator. Its open code states one package, the reference case of its thermal
comparison (a 40 mm package tiled GPU / HBM / HBF, 100 + 400 um of silicon, 1,400 W/m^2K on top, 300 K):
`sysmodel/hbf/reference_package.py` solves it by finite volumes, and the table gives the limit powers it implies
beside the paper's, under both readings of §6.3's sentence: each die heated alone, and one package power shared
evenly by the three die types (`limit_powers` in `sysmodel/hbf/thermal.py`). Our serving package stays an assumption, liquid-cooled for the paper hardware's 1.4 kW GPU
(the reference package would put that GPU above 1,000 C). The thermal model is checked against Kirchhoff's laws,
an independent RK4 integration and, for the reference package, the isothermal convection limit, reciprocity and
mesh convergence (`tests/sysmodel/test_hbf_thermal_reference.py`). `build/study/hbf/item6_trace.csv` traces one
decode iteration of speculative prefetch layer by layer: the experts prefetched (last iteration's), used and
missed, when the media stream reached the layer and when the layer started, the part read in time and the wait.

No routing trace that fits can be shipped: the per-token expert selections published with public code are of
other shapes (Mixtral 8x7B's 8 experts top-2; Switch-base-128's top-1, kept only as counts), log one layer with the
same experts for every token, carry no licence, or are model-hub data sets out of the project's reach, and no MoE
checkpoint installs from a package registry to record one: the dedup and prefetch headlines use uniform routing;
the skew calibration is labelled and only a sensitivity run.
`--routing-trace` replays one when it exists.
"""


def table(text: str) -> str:
    """A study's headline.md one heading level down."""
    title, *rest = text.splitlines()
    return "\n".join(["#" + title, *rest]) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="basedie study fidelity", description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=Path, default=ROOT / "build" / "study", help="the studies' output folder")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "fidelity-studies.md",
                        help="the page written")
    args = parser.parse_args(argv)
    tables = [args.studies / name / "headline.md" for name in ("streamdq", "hbf")]
    missing = [str(t) for t in tables if not t.is_file()]
    if missing:
        parser.error(f"no study output: {', '.join(missing)}; run the studies first")
    texts = [t.read_text() for t in tables]
    quick = [str(t) for t, text in zip(tables, texts) if "quick mode" in text.splitlines()[0]]
    if quick:
        parser.error(f"a quick run: {', '.join(quick)}; run the studies in full first")
    args.out.write_text(INTRO + "\n".join(table(text) for text in texts))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

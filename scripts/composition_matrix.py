"""Write the composition matrix into docs/design/composition.md (between `<!-- matrix -->` and
`<!-- end -->`).

    python scripts/composition_matrix.py

Runs every cell of `sysmodel.composition` (about 10 s) and writes, per system and weight format, each memory
layout and KV/prefix placement's outcome: the TPOT p50 in ms of a cell that runs, or the refusal's key, the
refusals listed once below the table. A refusal that is not physical is marked `gap`.
"""
import re
from pathlib import Path

from basedie import verified
from sysmodel.composition import FORMATS, MEMORIES, MODEL, HARDWARE, PLACEMENTS, SYSTEMS, WORKLOAD, Cell, outcome

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "design" / "composition.md"
MARKERS = re.compile(r"(<!-- matrix -->\n).*?(<!-- end -->)", re.S)


def table() -> str:
    figures = verified.load()
    columns = [(memory, placement) for memory in MEMORIES for placement, *_ in PLACEMENTS]
    reasons: dict[str, str] = {}
    lines = ["| system | weights | dequant | " + " | ".join(f"{m} {p}" for m, p in columns) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in columns) + " |"]
    for system in SYSTEMS:
        for weights, dequant, kernel in FORMATS:
            row = []
            for memory, placement in columns:
                kind, detail = outcome(Cell(system, weights, dequant, kernel, memory, placement), figures)
                if kind == "runs":
                    row.append(detail)
                    continue
                general = re.sub(r"layout \S+: ", "", re.sub(r"colocated:\d+x\d+|pd-\d:\d|sm-\d:\d|duopd", "SYSTEM",
                                                             detail))
                key = reasons.setdefault(general, f"{'gap' if kind == 'gap' else 'R'}{len(reasons) + 1}")
                row.append(key)
            lines.append(f"| {system} | {weights} | {dequant or '-'} | " + " | ".join(row) + " |")
    lines.append("")
    lines += [f"- **{key}**: {reason}" for reason, key in reasons.items()]
    header = (f"{MODEL} on `{HARDWARE}` (8 GPUs), {WORKLOAD.requests} requests of {WORKLOAD.input_len} -> "
              f"{WORKLOAD.output_len} tokens; a number is the TPOT p50 in ms, a key the refusal below (R: physical, "
              f"gap: not yet modelled). GPU kernels: GPTQ's; group size 128.\n")
    return header + "\n" + "\n".join(lines) + "\n"


def main() -> None:
    text = PAGE.read_text()
    if not MARKERS.search(text):
        raise SystemExit(f"{PAGE}: no <!-- matrix --> ... <!-- end --> section")
    PAGE.write_text(MARKERS.sub(lambda match: match.group(1) + table() + match.group(2), text))
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

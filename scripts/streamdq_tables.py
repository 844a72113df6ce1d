"""Print StreamDQ Tables 1-3 as computed next to the paper's values, with the deviation.

Table 3 also gets the fractions the DQB bench measured, when the verified-figures table has a `dqb` entry
with a `sz_read_fraction` figure (a list of {"weight_bits", "group_size", "fraction"}).

    python scripts/streamdq_tables.py [--table sysmodel/data/verified_blocks.json]
"""
import argparse
from pathlib import Path

from basedie import verified
from tb.models import lookup_table
from basedie.weights import pc_layout as pl

BITS = (4, 8)
GROUP_SIZES = (64, 128, 256)
IGS = (64, 128, 256)


def table_1() -> list[str]:
    lines = ["Table 1: region-lookup-table size (16 B per entry, 7 quantized linear layers per decoder block)",
             f"{'model':<14}{'blocks':>7}{'entries':>9}{'size':>9}   {'paper':>16}"]
    for model in lookup_table.MODELS:
        entries, size = lookup_table.PAPER_TABLE_1[model.name]
        computed = lookup_table.kilobytes(model.region_table_bytes)
        lines.append(f"{model.name:<14}{model.num_hidden_layers:>7}{model.entries:>9}{computed:>9}   "
                     f"{entries:>7}{size:>9}   deviation {model.entries - entries} entries")
    return lines


def table_2() -> list[str]:
    lines = ["Table 2: S/Z replication overhead (%), computed (paper, deviation in points)",
             f"{'G':<6}" + "".join(f"{f'{bits}-bit IG={ig}':>24}" for bits in BITS for ig in IGS)]
    for group_size in GROUP_SIZES:
        cells = []
        for bits in BITS:
            for ig in IGS:
                computed = 100 * pl.replication_overhead(bits, group_size, ig)
                paper = pl.PAPER_TABLE_2[(bits, group_size, ig)]
                cells.append(f"{computed:.2f} ({paper:.2f}, {computed - paper:+.3f})")
        lines.append(f"{group_size:<6}" + "".join(f"{cell:>24}" for cell in cells))
    return lines


def measured_sz_fractions(table_path: Path) -> tuple[dict[str, dict[tuple[int, int], float]], str]:
    """Per dqb parameter set, the measured S/Z read fraction by (weight bits, G); or why there is none."""
    try:
        table = verified.load(table_path)
    except verified.StaleTableError as error:
        return {}, f"no measured column: {error}"
    measured = {}
    for entry in table.entries:
        if entry.block == "dqb" and "sz_read_fraction" in entry.figures:
            label = ",".join(f"{k}={v}" for k, v in entry.params.items()) or "default"
            measured[label] = {(cell["weight_bits"], cell["group_size"]): cell["fraction"]
                               for cell in entry.figures["sz_read_fraction"]}
    return measured, "" if measured else "no measured column: the table has no dqb sz_read_fraction figure yet"


def table_3(table_path: Path) -> list[str]:
    measured, note = measured_sz_fractions(table_path)
    lines = ["Table 3: S/Z read requests among all read requests (%), computed (paper, deviation in points)"
             + "".join(f"; measured #{i + 1}: dqb {label}" for i, label in enumerate(measured))]
    lines.append(f"{'G':<6}" + "".join(f"{f'{bits}-bit':>24}" for bits in BITS)
                 + "".join(f"{f'#{i + 1} {bits}-bit':>12}" for i in range(len(measured)) for bits in BITS))
    for group_size in GROUP_SIZES:
        line = f"{group_size:<6}"
        for bits in BITS:
            computed = 100 * pl.sz_read_fraction(bits, group_size)
            paper = pl.PAPER_TABLE_3[(bits, group_size)]
            line += f"{f'{computed:.2f} ({paper:.2f}, {computed - paper:+.3f})':>24}"
        for cells in measured.values():
            for bits in BITS:
                fraction = cells.get((bits, group_size))
                line += f"{'-' if fraction is None else f'{100 * fraction:.2f}':>12}"
        lines.append(line)
    return lines + ([note] if note else [])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=verified.TABLE_PATH, help="verified-figures table")
    args = parser.parse_args(argv)
    print("\n\n".join("\n".join(lines) for lines in (table_1(), table_2(), table_3(args.table))))


if __name__ == "__main__":
    main()

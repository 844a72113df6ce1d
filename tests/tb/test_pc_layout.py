"""StreamDQ's PC-aware layout: Tables 1, 2 and 3 exactly, hand-worked placements, and the round trip
layout → golden DQB over every PC's streaming read → reassembly == direct dequantization."""
import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from basedie import verified
from tb.models import dqb, fp, lookup_table
from basedie.weights import pc_layout as pl

FORMATS = {4: ("int4",), 8: ("int8", "fp8_e4m3")}


def random_layer(rng: np.random.Generator, weight_format: str, n: int, k: int, group_size: int,
                 output: str = "fp16") -> pl.QuantizedLayer:
    groups = (n, k // group_size)
    if weight_format == "int4":
        codes, zeros = rng.integers(-8, 8, (n, k)), rng.integers(-8, 8, groups)
    else:  # every INT8 and E4M3 byte, NaN included
        codes, zeros = rng.integers(0, 256, (n, k)), rng.integers(0, 256, groups)
    scales = fp.to_bits(rng.uniform(-4, 4, groups).astype(np.float32).astype(fp.DTYPES[output]))
    return pl.QuantizedLayer(codes, zeros, scales, weight_format, group_size)


def stream_through_dqb(layout: pl.PCLayout, layer: int, tag: int, rounding: str) -> list[list[int]]:
    """Each PC's response beats to a streaming read of `layer`, answered by the golden DQB."""
    responses = []
    for pc in range(layout.num_pcs):
        reads = layout.reads(pc, layer)
        answers = dqb.dequantize_reads(layout.images[pc], layout.entries(pc), reads, [tag] * len(reads), rounding)
        assert not any(answer.error for answer in answers)
        responses.append([beat for answer in answers for beat in answer.beats])
    return responses


@pytest.mark.parametrize("cell", sorted(pl.PAPER_TABLE_2))
def test_table_2_every_cell(cell: tuple[int, int, int]) -> None:
    bits, group_size, ig = cell
    analytic = pl.replication_overhead(bits, group_size, ig)
    assert round(100 * analytic, 2) == pl.PAPER_TABLE_2[cell]
    # the same figure measured on what the layout actually placed, with enough PCs for the widest group
    layer = random_layer(np.random.default_rng(sum(cell)), FORMATS[bits][0], 4, 2048, group_size)
    assert layout_overhead(layer, ig, num_pcs=4) == pytest.approx(analytic, abs=1e-12)


def layout_overhead(layer: pl.QuantizedLayer, ig: int, num_pcs: int) -> float:
    return pl.build_layout([layer], ig, num_pcs).replication_overhead()


@pytest.mark.parametrize("cell", sorted(pl.PAPER_TABLE_3))
def test_table_3_every_cell(cell: tuple[int, int]) -> None:
    assert round(100 * pl.sz_read_fraction(*cell), 2) == pl.PAPER_TABLE_3[cell]


@pytest.mark.parametrize("model", lookup_table.MODELS, ids=lambda model: model.name)
def test_table_1_every_row(model: lookup_table.Model) -> None:
    entries, size = lookup_table.PAPER_TABLE_1[model.name]
    assert (model.entries, lookup_table.kilobytes(model.region_table_bytes)) == (entries, size)


def test_interleaving_by_hand() -> None:
    # IG = 64 B over 4 PCs: byte 448 is chunk 7 -> PC 3, second round -> local 64; byte 300 -> chunk 4 -> PC 0
    assert (pl.pc_of(448, 64, 4), pl.local_address(448, 64, 4)) == (3, 64)
    assert (pl.pc_of(300, 64, 4), pl.local_address(300, 64, 4)) == (0, 64 + 44)
    assert list(pl.global_offset(np.array([0, 63, 64, 130]), 1, 64, 4)) == [64, 127, 320, 2 * 256 + 64 + 2]


def test_small_groups_stay_with_their_pc() -> None:
    # INT4, G = 64 (32 B groups), IG = 64, 2 PCs, one row of K = 256: PC 0 holds groups 0, 1; PC 1 groups 2, 3
    scales = np.array([[0x3C00, 0x4000, 0x4200, 0x4400]], np.uint16)  # 1, 2, 3, 4
    layer = pl.QuantizedLayer(np.zeros((1, 256), np.int64), np.array([[1, -2, 3, -4]]), scales, "int4", 64)
    layout = pl.build_layout([layer], ig=64, num_pcs=2, global_base=256)
    for pc, (groups, zero_byte) in enumerate([((0, 1), 0xE1), ((2, 3), 0xC3)]):
        entry = layout.entries(pc)[0]
        assert (entry.weight_base, entry.weight_size, entry.log2_group_width) == (128, 64, 5)
        image = layout.images[pc]
        assert list(image[entry.scale_base:entry.scale_base + 4].view("<u2")) == list(scales[0, list(groups)])
        assert image[entry.zero_base] == zero_byte
    assert layout.replication_overhead() == 0


@pytest.mark.parametrize("num_pcs,pieces_per_pc", [(4, 1), (2, 2)])
def test_a_group_wider_than_ig_is_replicated_in_every_piece(num_pcs: int, pieces_per_pc: int) -> None:
    # INT8, G = 256 (256 B), IG = 64: the one group is cut in 4 pieces; each piece's PC holds a copy of its S/Z
    layer = pl.QuantizedLayer(np.arange(256).reshape(1, 256), np.array([[5]]), np.array([[0x3555]]), "int8", 256)
    layout = pl.build_layout([layer], ig=64, num_pcs=num_pcs)
    for pc in range(num_pcs):
        entry, image = layout.entries(pc)[0], layout.images[pc]
        assert (entry.weight_size, entry.log2_group_width) == (64 * pieces_per_pc, 6)
        assert list(image[entry.scale_base:entry.scale_base + 2 * pieces_per_pc]) == [0x55, 0x35] * pieces_per_pc
        assert list(image[entry.zero_base:entry.zero_base + pieces_per_pc]) == [5] * pieces_per_pc
    assert layout.replication_overhead() == pytest.approx(3 * 3 / (256 + 3))


@pytest.mark.parametrize("ig", [64, 128, 256])
@pytest.mark.parametrize("group_size", [64, 128, 256])
@pytest.mark.parametrize("weight_format", ["int4", "int8", "fp8_e4m3"])
def test_round_trip_through_the_golden_dqb(weight_format: str, group_size: int, ig: int) -> None:
    rng = np.random.default_rng([ig, group_size, len(weight_format)])
    for output in ("fp16", "bf16"):
        layers = [random_layer(rng, weight_format, 6, 1024, group_size, output),
                  random_layer(rng, weight_format, 2, 2048, group_size, output)]
        layout = pl.build_layout(layers, ig, num_pcs=4, global_base=3 * ig * 4)
        for rounding in dqb.ROUNDINGS:
            for index, layer in enumerate(layers):
                responses = stream_through_dqb(layout, index, dqb.tag_of(weight_format, output), rounding)
                got = layout.reassemble(index, responses)
                expected = layer.dequantize(output, rounding)
                assert len(fp.mismatches(got.reshape(-1), expected.reshape(-1), output)) == 0


@pytest.mark.parametrize("group_size,ig,breaks", [(256, 64, True), (256, 128, False)])
def test_round_trip_catches_a_layout_without_replication(group_size: int, ig: int, breaks: bool) -> None:
    # Planted bug: entries that stride S/Z by the whole group (128 B of INT4) instead of min(group, IG). Where a
    # group is wider than IG, a PC's consecutive IG pieces belong to different groups and the DQB must fail.
    layer = random_layer(np.random.default_rng(11), "int4", 4, 1024, group_size)
    layout = pl.build_layout([layer], ig, num_pcs=4)
    placed = layout.layers[0]
    unreplicated = tuple(dataclasses.replace(entry, log2_group_width=7) for entry in placed.entries)
    layout.layers[0] = dataclasses.replace(placed, entries=unreplicated)
    got = layout.reassemble(0, stream_through_dqb(layout, 0, dqb.tag_of("int4", "fp16"), "nearest_even"))
    assert bool(len(fp.mismatches(got.reshape(-1), layer.dequantize("fp16").reshape(-1), "fp16"))) == breaks


def test_round_trip_with_a_narrow_interface() -> None:
    # a 128-bit interface (16 B beats), as a small bench configuration would use
    layer = random_layer(np.random.default_rng(7), "int4", 4, 512, 128)
    layout = pl.build_layout([layer], ig=64, num_pcs=2, beat_bytes=16)
    responses = []
    for pc in range(2):
        reads = layout.reads(pc, 0)
        assert len(reads) == layout.entries(pc)[0].weight_size // 16
        answers = dqb.dequantize_reads(layout.images[pc], layout.entries(pc), reads,
                                       [dqb.tag_of("int4", "fp16")] * len(reads), interface_bits=128)
        responses.append([beat for answer in answers for beat in answer.beats])
    assert (layout.reassemble(0, responses, interface_bits=128) == layer.dequantize("fp16")).all()


def test_bad_parameters_name_the_field() -> None:
    layer = random_layer(np.random.default_rng(0), "int8", 2, 256, 64)
    with pytest.raises(ValueError, match="ig="):
        pl.build_layout([layer], ig=96, num_pcs=2)
    with pytest.raises(ValueError, match="num_pcs="):
        pl.build_layout([layer], ig=64, num_pcs=0)
    with pytest.raises(ValueError, match="global_base="):
        pl.build_layout([layer], ig=64, num_pcs=2, global_base=64)
    with pytest.raises(ValueError, match=r"layers\[0\]"):
        pl.build_layout([layer], ig=256, num_pcs=4)
    with pytest.raises(ValueError, match="group_size="):
        pl.QuantizedLayer(layer.codes, layer.zeros, layer.scales, "int8", 96)
    with pytest.raises(ValueError, match="weight_format="):
        pl.QuantizedLayer(layer.codes, layer.zeros, layer.scales, "int2", 64)
    with pytest.raises(ValueError, match="scales holds float16"):
        pl.QuantizedLayer(layer.codes, layer.zeros, layer.scales.view(np.float16), "int8", 64)
    with pytest.raises(ValueError, match="scales has shape"):
        pl.QuantizedLayer(layer.codes, layer.zeros, layer.scales[:, :1], "int8", 64)


def run_tables_script(argv: list[str]) -> None:
    path = Path(__file__).parents[2] / "scripts" / "streamdq_tables.py"
    spec = importlib.util.spec_from_file_location("streamdq_tables", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(argv)


def test_tables_script_without_and_with_measured_fractions(tmp_path: Path, capsys) -> None:
    run_tables_script(["--table", str(verified.TABLE_PATH)])  # the committed table: measured column if any
    assert "Table 1" in capsys.readouterr().out
    table = tmp_path / "table.json"
    provenance = {"rtl_module": "rtl.dqb.dqb", "bench": "tb.dqb.bench", "cycles_simulated": 1,
                  "sources_digest": verified.sources_digest("rtl.dqb.dqb", "tb.dqb.bench")}
    cells = [{"weight_bits": 4, "group_size": 128, "fraction": 0.0376}]
    verified.store([verified.VerifiedEntry("dqb", {"interface_bits": 128}, {"sz_read_fraction": cells}, provenance)],
                   table)
    run_tables_script(["--table", str(table)])
    lines = capsys.readouterr().out.splitlines()
    assert "measured #1: dqb interface_bits=128" in lines[[line.startswith("Table 3") for line in lines].index(True)]
    row = next(line for line in lines if line.startswith("128 ") and "3.76 (3.76" in line)
    assert row.split()[-2:] == ["3.76", "-"]
    run_tables_script(["--table", str(tmp_path / "absent.json")])
    assert "no measured column" in capsys.readouterr().out

"""`basedie study base-die --readme README`: the per-model summary, written between the README's two markers."""
import pytest

from basedie.studies import base_die


def row(model: str, name: str, tpot: float, energy: float, status: str = "ok", mm2: float = 0.0,
        w: float = 0.0) -> dict:
    return {"model": model, "row": name, "tpot_p50_ms": tpot, "energy_j_per_token": energy, "status": status,
            "logic_mm2": mm2, "logic_w": w}


HEADLINE = [row("M", "pd-1:1", 9.0, 5.0), row("M", "duopd", 2.0, 4.0, mm2=8.0, w=7.0),
            row("M", "duopd+dqb", 2.5, 3.0, mm2=9.0, w=8.0), row("M", "duopd+dqb+C", 15.0, 3.5, mm2=9.0, w=8.0),
            row("M", "duopd+dqb+C+kv+prefix", 1.0, 0.5), row("M", "duopd+C", 30.0, 6.0, mm2=8.0, w=7.0),
            row("N", "pd-1:1", 3.0, 2.0), row("N", "duopd", 4.0, 2.5), row("N", "duopd+dqb", 4.5, 2.6),
            row("N", "duopd+dqb+C", 0.0, 0.0, status="does not fit: x"), row("N", "duopd+C", 20.0, 9.0)]


def test_the_summary_names_each_models_best_rows_the_hbf_gain_and_the_logic() -> None:
    lines = base_die.readme_section(HEADLINE, "basedie study base-die").splitlines()
    assert lines[0].startswith("Written by `basedie study base-die`")
    # the prefix row runs another workload and is left out of the best rows; a refused row gives no ratio
    assert "| M | duopd, 2 ms | duopd+dqb, 3 J | 2.00x | 9 mm², 8 W |" in lines
    assert "| N | pd-1:1, 3 ms | pd-1:1, 2 J | - | 0 mm², 0 W |" in lines


def test_only_the_text_between_the_markers_changes(tmp_path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# top\n{base_die.README_BEGIN}\nold\n{base_die.README_END}\nafter\n")
    text = base_die.replace_section(readme.read_text(), base_die.README_BEGIN, base_die.README_END, "new\n")
    assert text == f"# top\n{base_die.README_BEGIN}\nnew\n{base_die.README_END}\nafter\n"


def test_a_readme_without_the_markers_is_refused_before_any_simulation(tmp_path, capsys) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    with pytest.raises(SystemExit) as exit_:
        base_die.main(["--quick", "--readme", str(readme), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and "needs one" in capsys.readouterr().err
    assert readme.read_text() == "no markers\n" and not (tmp_path / "out").exists()

"""`basedie study NAME [OPTIONS]`: every registered study is a choice, its options are its own, a bad name or a bad
option is exit 2 with nothing written."""
import importlib

import pytest

from basedie.cli import main
from basedie.studies import STUDIES


def test_every_registered_study_is_a_module_with_a_main() -> None:
    assert list(STUDIES) == ["duopd", "streamdq", "hbf", "base-die", "fidelity", "prefill-batching"]
    for name in STUDIES:
        assert callable(importlib.import_module(STUDIES[name][0]).main), name


def test_an_unknown_study_is_refused_with_the_choices(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["study", "duopd2"])
    assert exit_.value.code == 2
    assert "invalid choice: 'duopd2'" in capsys.readouterr().err


def test_the_options_after_the_name_are_the_studys_own(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["study", "base-die", "--quick", "--slo-ms", "-1", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and not (tmp_path / "out").exists()
    err = capsys.readouterr().err
    assert err.startswith("usage: basedie study base-die") and "--slo-ms" in err


def test_a_study_runs_from_the_command(tmp_path, capsys) -> None:
    """The fidelity tables from two finished folders that are not there: its own one-line refusal, exit 2."""
    with pytest.raises(SystemExit) as exit_:
        main(["study", "fidelity", "--studies", str(tmp_path / "none"), "--out", str(tmp_path / "page.md")])
    assert exit_.value.code == 2 and not (tmp_path / "page.md").exists()
    assert "basedie study fidelity: error:" in capsys.readouterr().err

"""scripts/mutation_report.py keeps a module's mutmut verdicts in the repository and restores them in a fresh
checkout, without overwriting a folder's own newer verdicts."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _report(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("mutation_report", ROOT / "scripts" / "mutation_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    monkeypatch.setattr(report, "WORK", tmp_path / "work")
    monkeypatch.setattr(report, "RESULTS", tmp_path / "results")
    return report


def test_saved_verdicts_are_restored_in_a_fresh_folder_and_never_over_a_folders_own(tmp_path, monkeypatch) -> None:
    report = _report(tmp_path, monkeypatch)
    meta = tmp_path / "work" / "hbf_service" / "mutants" / "sysmodel" / "hbf" / "service.py.meta"
    assert not meta.exists() and not report.prepare("hbf_service").joinpath("mutants", "sysmodel").exists()
    meta.parent.mkdir(parents=True)
    meta.write_text('{"exit_code_by_key": {"a__mutmut_1": 1}}')
    assert report.save("hbf_service").read_text() == meta.read_text()
    meta.write_text('{"exit_code_by_key": {"a__mutmut_1": 0}}')      # a later run's verdict in the folder
    report.prepare("hbf_service")
    assert meta.read_text() == '{"exit_code_by_key": {"a__mutmut_1": 0}}'
    meta.unlink()                                                       # a fresh checkout
    report.prepare("hbf_service")
    assert meta.read_text() == '{"exit_code_by_key": {"a__mutmut_1": 1}}'

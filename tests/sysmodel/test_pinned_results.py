"""Every study's headline results, recomputed (in the study's quick mode) and compared with the values pinned in
`tests/sysmodel/pinned/*.json`: a model change that moves a result fails here until the pinned file is updated."""
import copy

import pytest

from tests.sysmodel import pinned


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem, marks=[pinned.xdist_group(p.stem), pytest.mark.slow])
                                  for p in pinned.files()])
def test_results_match_the_pinned_values(path) -> None:
    pin = pinned.json.loads(path.read_text())
    drift = pinned.drifts(pin, pinned.measured(pin))
    assert not drift, f"{path.name}: results moved (update the pinned file and say why):\n" + "\n".join(drift)


def test_a_drift_a_missing_row_and_a_new_row_are_all_reported() -> None:
    pin = {"numbers": ["ours"], "texts": ["simulation"], "rel_tol": 1e-6,
           "expected": {"a": {"ours": 1.0, "simulation": "x"}, "b": {"ours": None, "simulation": "y"},
                        "c": {"ours": 2.0, "simulation": "z"}}}
    now = {"a": {"ours": 1.0 + 1e-9, "simulation": "x"}, "b": {"ours": float("nan"), "simulation": "y"},
           "c": {"ours": 2.0, "simulation": "z"}}
    assert pinned.drifts(pin, now) == []
    moved = copy.deepcopy(now)
    moved["a"]["ours"] = 1.00001
    moved["c"]["simulation"] = "w"
    del moved["b"]
    moved["d"] = {"ours": 3.0, "simulation": "v"}
    assert pinned.drifts(pin, moved) == [
        "a [ours]: pinned 1.0, now 1.00001", "c [simulation]: pinned 'z', now 'w'", "new row, not pinned: d",
        "pinned row no longer produced: b"]

"""What every study writes (`basedie.studies.tables`): CSV tables whose header is every row's keys, Markdown
cells that keep their pipes, and a README section replaced between its two markers only."""
import csv

import pytest

from basedie.studies.tables import cell, replace_section, write_csv

BEGIN, END = "<!-- begin -->", "<!-- end -->"


def test_a_csv_table_has_every_rows_keys_in_first_seen_order(tmp_path) -> None:
    path = tmp_path / "t.csv"
    write_csv(path, [{"a": 1, "b": "x,y"}, {"c": 2.5, "a": 3}])
    assert path.read_bytes().split(b"\r\n")[0] == b"a,b,c"          # csv's own line ends, none doubled
    with path.open(newline="") as handle:
        assert list(csv.DictReader(handle)) == [{"a": "1", "b": "x,y", "c": ""}, {"a": "3", "b": "", "c": "2.5"}]


def test_a_markdown_cell_escapes_its_pipes() -> None:
    assert cell("a|b||c") == "a\\|b\\|\\|c" and cell("none") == "none"


@pytest.mark.parametrize("text", [f"{BEGIN}\n{BEGIN}\n{END}\n",      # the first marker twice
                                  f"{BEGIN}\n{END}\n{END}\n",        # the second twice
                                  f"{END}\nx\n{BEGIN}\n",            # in the wrong order
                                  f"{BEGIN}\n", "nothing\n"])
def test_markers_missing_repeated_or_out_of_order_are_refused(text) -> None:
    with pytest.raises(ValueError, match="needs one"):
        replace_section(text, BEGIN, END, "body\n")


def test_only_the_text_between_the_markers_is_replaced() -> None:
    assert replace_section(f"top\n{BEGIN}\nold\n{END}\ntail\n", BEGIN, END, "new\n") == \
        f"top\n{BEGIN}\nnew\n{END}\ntail\n"

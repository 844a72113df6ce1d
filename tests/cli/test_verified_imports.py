"""The import scan behind the verified table's source digests finds every import statement, however nested, and
its answers, kept across processes by the text's hash, are read back instead of parsing again."""
import pytest

from basedie.verified import _imports

SOURCE = '''
import a, b.c
from . import d
from ..e import f as g, h
def outer():
    from .inner import x
    class Local:
        import k
    try:
        import m
    except ImportError:
        from n import o
    else:
        import p
    finally:
        import q
    with open("x"):
        for _ in ():
            while True:
                if 1:
                    import r
                else:
                    import s
    match 1:
        case 1:
            import t
lambda: __import__("not_a_statement")
'''


def test_every_import_statement_is_found_with_its_level() -> None:
    assert sorted(map(repr, _imports(SOURCE))) == sorted(map(repr, [
        (None, None, ("a", "b.c")), (1, None, ("d",)), (2, "e", ("f", "h")), (1, "inner", ("x",)),
        (None, None, ("k",)), (None, None, ("m",)), (0, "n", ("o",)), (None, None, ("p",)), (None, None, ("q",)),
        (None, None, ("r",)), (None, None, ("s",)), (None, None, ("t",))]))


def test_closures_sharing_a_memo_are_each_what_they_are_alone(tmp_path) -> None:
    # rtl.a imports rtl.common; rtl.b imports rtl.common and rtl.extra; rtl.common imports nothing of rtl.
    from basedie.verified import _imported_sources
    (tmp_path / "rtl").mkdir()
    for name, text in {"__init__": "", "common": "import numpy\n", "a": "from .common import X\n",
                       "b": "from . import common\nfrom rtl.extra import Y\n", "extra": ""}.items():
        (tmp_path / "rtl" / f"{name}.py").write_text(text)
    known: dict = {}
    a = _imported_sources("rtl.a", ("rtl",), tmp_path, known)
    b = _imported_sources("rtl.b", ("rtl",), tmp_path, known)
    assert sorted(a) == ["rtl", "rtl.a", "rtl.common"]
    assert sorted(b) == ["rtl", "rtl.b", "rtl.common", "rtl.extra"]
    assert b == _imported_sources("rtl.b", ("rtl",), tmp_path) and "rtl.common" in known


def test_a_later_process_reads_the_imports_without_parsing(tmp_path, monkeypatch) -> None:
    from basedie import verified
    path = tmp_path / "cache" / "imports.json"
    first = verified.ImportCache(path)
    parsed = first.imports(SOURCE)
    first.save()
    monkeypatch.setattr(verified, "_parse", lambda text: pytest.fail("parsed again"))
    assert verified.ImportCache(path).imports(SOURCE) == parsed      # tuples again, as parsed


def test_an_edited_text_a_broken_file_and_a_full_file_are_parsed_again(tmp_path) -> None:
    from basedie import verified
    path = tmp_path / "imports.json"
    cache = verified.ImportCache(path)
    cache.imports("import a\n")
    cache.save()
    assert verified.ImportCache(path).imports("import a\nfrom b import c\n") == ((None, None, ("a",)),
                                                                                  (0, "b", ("c",)))
    path.write_text('{"key": [[1, 2]]}')           # a stored answer of the wrong shape
    assert verified.ImportCache(path).imports("import a\n") == ((None, None, ("a",)),)
    full = verified.ImportCache(tmp_path / "full.json", limit=1)
    full.imports("import a\n")
    full.imports("import b\n")
    full.save()                                    # two texts stored, one more than the limit
    assert verified.ImportCache(tmp_path / "full.json", limit=1)._read() == {}
    assert len(verified.ImportCache(tmp_path / "full.json", limit=2)._read()) == 2

"""tests/objcache.py: a compile of a source outside the build folder is done once per key and copied into later
builds; another header or flag is another key; the build folder's own sources always compile."""
import shutil
import stat
from pathlib import Path

import pytest

from tests import objcache

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler on PATH")

SOURCE = '#include "shared.h"\nint answer() { return ANSWER; }\n'


@pytest.fixture
def compiler(tmp_path) -> tuple[str, Path]:
    """`c++` behind a script that logs each command line: the log shows which compiles ran."""
    log = tmp_path / "commands.log"
    script = tmp_path / "cxx"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec c++ "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), log


def compile_in(build: Path, source: Path, cxx: str, cache: Path, *flags: str) -> int:
    """`cxx -c -o answer.o source` in the build folder `build`, through the cache, as Verilator's makefile does."""
    build.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(build)
        return objcache.compile_cached([cxx, *flags, "-MMD", "-I", str(source.parent), "-c", "-o", "answer.o",
                                        str(source)], cache)


def sources(folder: Path) -> Path:
    """`answer.cpp` and the header it includes, in `folder`."""
    folder.mkdir(exist_ok=True)
    (folder / "shared.h").write_text("#define ANSWER 42\n")
    (folder / "answer.cpp").write_text(SOURCE)
    return folder / "answer.cpp"


def compiles(log: Path) -> int:
    return sum(" -c " in line for line in log.read_text().splitlines())


def test_a_shared_source_compiles_once_and_a_changed_header_or_flag_compiles_again(compiler, tmp_path) -> None:
    cxx, log = compiler
    source, cache = sources(tmp_path / "runtime"), tmp_path / "cache"
    assert compile_in(tmp_path / "a", source, cxx, cache, "-O1") == 0
    assert compile_in(tmp_path / "b", source, cxx, cache, "-O1") == 0
    assert compiles(log) == 1
    assert (tmp_path / "b" / "answer.o").read_bytes() == (tmp_path / "a" / "answer.o").read_bytes()
    assert (tmp_path / "b" / "answer.d").read_text() == (tmp_path / "a" / "answer.d").read_text()
    (source.parent / "shared.h").write_text("#define ANSWER 43\n")
    assert compile_in(tmp_path / "c", source, cxx, cache, "-O1") == 0
    assert compile_in(tmp_path / "d", source, cxx, cache, "-O2") == 0
    assert compiles(log) == 3


def test_the_build_folders_own_sources_always_compile(compiler, tmp_path) -> None:
    cxx, log = compiler
    source = sources(tmp_path / "build")
    for _ in range(2):
        assert compile_in(source.parent, source, cxx, tmp_path / "cache", "-O1") == 0
    assert compiles(log) == 2 and not (tmp_path / "cache").exists()


def test_a_failing_compile_fails_and_leaves_nothing_cached(compiler, tmp_path) -> None:
    cxx, _ = compiler
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "answer.cpp").write_text("int answer() { return }\n")
    assert compile_in(tmp_path / "a", tmp_path / "src" / "answer.cpp", cxx, tmp_path / "cache", "-O1") != 0
    assert not (tmp_path / "cache").exists()

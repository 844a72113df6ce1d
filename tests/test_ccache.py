"""The compiler cache the Verilator builds of a pytest run share (tests/conftest.py): a runtime source compiled by
one build is not compiled again by the next, and another header or flag compiles again."""
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests import conftest

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler on PATH")


@pytest.fixture
def compiler(tmp_path) -> tuple[str, Path]:
    """`c++` behind a script that logs each compile (`-c`, not ccache's own preprocessing runs)."""
    log = tmp_path / "compiles.log"
    script = tmp_path / "cxx"
    script.write_text(f'#!/bin/sh\ncase " $* " in *" -c "*) echo "$*" >> {log};; esac\nexec c++ "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), log


def compile_in(build: Path, source: Path, cxx: str, cache: Path, *flags: str) -> int:
    """`cxx -c -o answer.o source` in `build` through the configured ccache, as Verilator's makefile does."""
    build.mkdir(exist_ok=True)
    command = [conftest.ccache(), cxx, *flags, "-MMD", "-I", str(source.parent), "-c", "-o", "answer.o", str(source)]
    return subprocess.run(command, cwd=build, env={**os.environ, "CCACHE_DIR": str(cache)}).returncode


def compiles(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_shared_source_compiles_once_and_a_changed_header_or_flag_compiles_again(compiler, tmp_path) -> None:
    cxx, log = compiler
    runtime, cache = tmp_path / "runtime", tmp_path / "cache"
    runtime.mkdir()
    (runtime / "shared.h").write_text("#define ANSWER 42\n")
    source = runtime / "answer.cpp"
    source.write_text('#include "shared.h"\nint answer() { return ANSWER; }\n')
    assert compile_in(tmp_path / "a", source, cxx, cache, "-O1") == 0
    assert compile_in(tmp_path / "b", source, cxx, cache, "-O1") == 0
    assert compiles(log) == 1
    assert (tmp_path / "b" / "answer.o").read_bytes() == (tmp_path / "a" / "answer.o").read_bytes()
    assert (tmp_path / "b" / "answer.d").read_text() == (tmp_path / "a" / "answer.d").read_text()
    (runtime / "shared.h").write_text("#define ANSWER 43\n")
    assert compile_in(tmp_path / "c", source, cxx, cache, "-O1") == 0
    assert compile_in(tmp_path / "d", source, cxx, cache, "-O2") == 0
    assert compiles(log) == 3


def test_a_failing_compile_fails(compiler, tmp_path) -> None:
    cxx, _ = compiler
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "answer.cpp").write_text("int answer() { return }\n")
    assert compile_in(tmp_path / "a", tmp_path / "src" / "answer.cpp", cxx, tmp_path / "cache", "-O1") != 0

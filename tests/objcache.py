"""A compiler cache for the Verilator builds of a pytest run: Verilator's makefiles prefix every compile with
`$(OBJCACHE)`, and tests/conftest.py points it at this script.

Every build compiles the same Verilator runtime (`verilated.cpp`, `verilated_vpi.cpp`, `verilated_threads.cpp`,
`verilated_dpi.cpp`) with the same flags: 13.6 of the 16.4 s of CPU that compiling a small FP unit's
simulator takes. Here a compile of a source outside the build folder is done once and its object copied into
later builds. The key is the compiler, its command line less the output name, and the preprocessed source (0.1 s
to compute), so another flag, header or model header (cocotb's `verilator.cpp` includes the model's) is another
object. The generated model's own sources, in the build folder, always compile.

    OBJCACHE="python tests/objcache.py" make -f Vtop.mk   # the cache folder: $BASEDIE_OBJCACHE
"""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

FOLDER = "BASEDIE_OBJCACHE"
"""The environment variable that names the cache folder."""


def cacheable(command: list[str]) -> bool:
    """A single compile (`-c -o OUT SOURCE`) of a C++ source outside the current folder, with no dependency-file
    options but `-MMD`."""
    source = Path(command[-1])
    return ("-c" in command and "-o" in command and source.suffix == ".cpp" and source.is_absolute()
            and not source.is_relative_to(Path.cwd()) and not {"-MF", "-MT", "-MQ", "-MD"} & set(command))


def key(command: list[str]) -> str | None:
    """What the object depends on, hashed; None when the source does not preprocess."""
    out = command.index("-o")
    flags = [arg for arg in command[:out] + command[out + 2:] if arg not in ("-c", "-MMD")]
    compiler = Path(shutil.which(command[0]) or command[0]).resolve()
    preprocessed = subprocess.run([*flags, "-E"], capture_output=True)
    if preprocessed.returncode:
        return None
    stat = compiler.stat()
    text = "\0".join([str(compiler), str(stat.st_size), str(stat.st_mtime_ns), *flags])
    return hashlib.sha256(text.encode() + b"\0" + preprocessed.stdout).hexdigest()


def compile_cached(command: list[str], folder: Path) -> int:
    """Run `command` (a compile) or copy its object (and `-MMD`'s dependency file) from `folder`."""
    digest = key(command) if cacheable(command) else None
    if digest is None:
        return subprocess.run(command).returncode
    out = Path(command[command.index("-o") + 1])
    products = [(out, folder / f"{digest}.o")]
    if "-MMD" in command:
        products.append((out.with_suffix(".d"), folder / f"{digest}.d"))
    if all(cached.exists() for _, cached in products):
        for target, cached in products:
            shutil.copyfile(cached, target)
        return 0
    status = subprocess.run(command).returncode
    if status == 0 and all(target.exists() for target, _ in products):
        folder.mkdir(parents=True, exist_ok=True)
        for target, cached in products:   # concurrent writers of one key each replace it whole
            staging = cached.with_name(f"{cached.name}.tmp{os.getpid()}")
            shutil.copyfile(target, staging)
            staging.replace(cached)
    return status


if __name__ == "__main__":
    folder = os.environ.get(FOLDER)
    command = sys.argv[1:]
    sys.exit(compile_cached(command, Path(folder)) if folder else subprocess.run(command).returncode)

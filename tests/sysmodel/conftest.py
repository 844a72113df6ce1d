"""Under mutmut (`MUTANT_UNDER_TEST` set) the profiles are read afresh for each test: mutmut forks each mutant's
tests from a process whose earlier tests cached them, and records which tests run a function by running it, so a
cached profile would hide the code that builds it from both. A progress bar takes a lock of its own there: tqdm's
default lock is a semaphore shared by every forked process, and a mutant's process killed at its time limit while
holding it would leave every later bar (`simulate(progress=True)`) waiting for ever."""
import os
import threading

import pytest
from tqdm import tqdm

from sysmodel import perf, quantized_measured


@pytest.fixture(autouse="MUTANT_UNDER_TEST" in os.environ)
def _profiles_read_afresh():
    for cached in (perf.load_profile, perf._nearest_shape, perf._nearest_vector, quantized_measured.series):
        cached.cache_clear()


@pytest.fixture(autouse="MUTANT_UNDER_TEST" in os.environ)
def _progress_bars_lock_apart():
    tqdm.set_lock(threading.RLock())

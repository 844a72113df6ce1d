"""Under mutmut (`MUTANT_UNDER_TEST` set) the profiles are read afresh for each test: mutmut forks each mutant's
tests from a process whose earlier tests cached them, and records which tests run a function by running it, so a
cached profile would hide the code that builds it from both."""
import os

import pytest

from sysmodel import perf, quantized_measured


@pytest.fixture(autouse="MUTANT_UNDER_TEST" in os.environ)
def _profiles_read_afresh():
    for cached in (perf.load_profile, perf._nearest_shape, perf._nearest_vector, quantized_measured.series):
        cached.cache_clear()

"""Under mutmut each mutant's tests run in a process forked after a clean run, which keeps the profiles that run
cached: clearing them as a session starts makes the mutants of the code that builds them run."""
import pytest

from sysmodel import perf, quantized_measured


@pytest.fixture(scope="session", autouse=True)
def _profiles_read_afresh():
    for cached in (perf.load_profile, perf._nearest_shape, perf._nearest_vector, quantized_measured.series):
        cached.cache_clear()

"""`basedie verify --scheduler`: every (block, parameter set) bench is one task on a Dask cluster. Workers build
and run it with their own installed package and build cache (BASEDIE_BUILD_DIR); the figures come back here,
where the table is written as by a local run."""
from basedie.verified import VerifiedEntry

from .verify import Run, verify_one


def verify_on(client, runs: list[Run], waves: bool = False) -> list[VerifiedEntry]:
    """`basedie.flow.verify.verify` on `client`'s workers: the entries in run order; raises the first bench failure."""
    futures = client.map(verify_one, runs, waves=waves, pure=False)
    return client.gather(futures)

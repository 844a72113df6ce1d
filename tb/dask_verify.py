"""`basedie verify --scheduler`: every (block, parameter set) bench is one task on a Dask cluster. Workers build
and run it with their own installed package and build cache (BASEDIE_BUILD_DIR); the figures come back here,
where the table is written as by a local run."""
from sysmodel.verified import VerifiedEntry

from .verify import bench_runs, verify_one


def verify_on(client, block_names: list[str], waves: bool = False) -> list[VerifiedEntry]:
    """`tb.verify.verify` on `client`'s workers: the entries in bench order; raises the first bench failure."""
    runs = bench_runs(block_names)
    futures = client.map(verify_one, [name for name, _ in runs], [config for _, config in runs], waves=waves,
                         pure=False)
    return client.gather(futures)

"""A `Setting` on a machine and a model given as objects, for tests that build systems without simulating."""
from sysmodel.config import SimulationConfig
from sysmodel.deployments import parse
from sysmodel.systems import Setting
from sysmodel.workload import FixedBatch


def make_setting(hardware, model, table, layout=None, system: str = "duopd", **config) -> Setting:
    """What `config.resolve` makes of these inputs, except that `hardware` is taken as given (a test passes the
    machine it means, `layout` already applied)."""
    return Setting(config=SimulationConfig(system=system, model=model, workload=FixedBatch(1, 1, 1), hardware=hardware,
                                           memory=layout or "hbm", **config),
                   spec=parse(system), hardware=hardware, model=model, table=table, layout=layout)

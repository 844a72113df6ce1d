"""A toy serving system, added the way any system is: one module with its spec and one registration line. One
instance of tensor-parallel degree `tp` batching whole prompts with decoding (as `colocated:1xTP:orca`)."""
from dataclasses import dataclass

from sysmodel.operators import Shard
from sysmodel.servers import MixedServer
from sysmodel.systems import SYSTEMS, ServingSystem, Setting, System, gpu_execution, kv_pool


@dataclass(frozen=True)
class Toy(System):
    tp: int = 2

    def build(self, setting: Setting, built: ServingSystem) -> None:
        hw, shard = setting.hardware, Shard(setting.model, self.tp)
        account = built.account("toy", "gpu", self.tp * hw.gpu.flops, self.tp * hw.gpu.memory.bandwidth,
                                self.tp * setting.gpu_power_w, hw.gpu.stack.energy_per_byte)
        server = MixedServer(built.loop, "toy", gpu_execution(setting, shard).cost, account,
                             kv=kv_pool(setting, shard, "toy"), max_batch=setting.config.max_batch,
                             chunk_tokens=setting.chunk, finished=built.finished.append, whole_prompts=True, mixed=True)
        built.submit = server.submit


SYSTEMS.register("toy", Toy(), "one TP2 instance mixing whole prompts with decoding (a test's toy)")

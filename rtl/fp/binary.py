"""The component shape shared by the two-operand floating-point units."""
from amaranth.hdl import Value
from amaranth.lib import data

from ..params import NoParams
from ..pipeline import PipelinedUnit, Stages
from .formats import FP32, FloatFormat


class BinaryUnit(PipelinedUnit):
    """Operands `{a, b}` of `operand_format` in one payload (`a` in the low bits), an FP32 result.

    Subclasses name their datapath function, which builds the unit's stages from the two operands.
    """

    operand_format: FloatFormat
    function: staticmethod

    def __init__(self, params: NoParams = NoParams()) -> None:
        self.params = params
        width = self.operand_format.width
        super().__init__(data.StructLayout({"a": width, "b": width}), FP32.width)

    def datapath(self, stages: Stages, operands) -> Value:
        return self.function(stages, operands.a, operands.b)

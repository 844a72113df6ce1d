"""Payload layouts of the PNM top's own ports and of the links between its sequencers and units. The host,
GPU and memory-controller ports are the controller's and the MMU's own layouts."""
from amaranth.lib import data, enum

from ..pnm_lane.ports import control_fields
from ..pnm_controller import ports as controller_ports
from .params import PNMParams


class Step(enum.Enum, shape=2):
    """A sequencer's state: IDLE takes a command, RUN moves its operands and results, DONE answers it."""
    IDLE = 0
    RUN = 1
    DONE = 2


class UnitError(enum.Enum, shape=2):
    """A command a sequencer cannot run at this size or layout (docs/pnm.md, "What each unit runs"): it
    completes without touching the buffer, and the top reports it here until the next `start`."""
    NONE = 0
    ARRAY = 1   # an array command: PV/GEMV/SCORE whose shape or alignment the dot-product sequencer refuses
    VECTOR = 2  # a vector command whose vectors are not whole rows (docs/pnm.md)


def status(p: PNMParams) -> data.StructLayout:
    """The controller's status (`state`, `error`, `pc`) and the first refused command (`unit_error`, and its
    `unit_id`: the instruction's address modulo 2^id_bits)."""
    return data.StructLayout({**dict(controller_ports.status(p.controller_params()).members),
                              "unit_error": UnitError, "unit_id": p.id_bits})


def lane_beat(p: PNMParams) -> data.StructLayout:
    """What every lane shares in one beat: the memory operand tile (weights or keys, `width` FP16) and the
    controls. Each lane's own operand travels beside it (`LaneArray.operand<j>`), because all lanes' operands
    together (16 × 1,024 FP16 at the paper's size) exceed Amaranth's 65,536-bit limit on one value."""
    return data.StructLayout({"memory": data.ArrayLayout(16, p.width), **control_fields()})


def lane_results(p: PNMParams) -> data.StructLayout:
    """One output beat of every lane: its MLP accumulator, or in attention mode its sublanes' dot products."""
    sublanes = p.width // p.sublane_width
    return data.StructLayout({"accumulator": data.ArrayLayout(32, p.lanes),
                              "sublane_sums": data.ArrayLayout(data.ArrayLayout(32, sublanes), p.lanes)})

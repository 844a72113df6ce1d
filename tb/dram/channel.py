"""The timing core of one HBM pseudo channel and its controller, clocked in tCK: a plain Python class (no cocotb),
so hand-computed command sequences test it directly; `tb.dram.controller` puts it behind a block's ports.

Each cycle (`step`) the controller issues at most one column command (RD, WR) and one row command (ACT, PRE) —
HBM's separate row and column command buses — then hands back the responses whose data is done: a read's
`cl + bl` after its RD, a write's `cwl + bl` after its WR.

- Open-row policy: a row stays open until a request for another row of its bank, or a refresh, closes it.
- Scheduling: `frfcfs` (first-ready, first-come first-served, Rixner et al., ISCA 2000): the oldest queued row
  hit whose RD/WR may issue goes first; a bank's row is closed only once no queued request hits it. `fcfs`:
  column commands strictly in arrival order (the oldest queued request only); rows are still opened ahead for
  the oldest waiting request of every other bank. Either way a request never passes an older one to the same
  address when either writes. `frfcfs` turns to arrival order while its oldest request has waited `age_cap`.
- Responses leave in arrival order (`in_order`: a finished request waits for every older one) or as they finish.
- Refresh: all-bank, due every `refi` cycles from cycle 0. From the due cycle on no ACT, RD or WR issues; the
  open rows are closed with one all-bank precharge (PREA) as soon as every bank allows it, REF follows, and no
  ACT for `rfc` cycles after it.
- Timing: every constraint below is `(scope, earlier command, later command, cycles)`, as Ramulator2 states the
  HBM3 standard (`python/ramulator/dram/hbm3.py`, [R2-HBM3] in `tb.dram.timing`), plus the four-activate window
  tFAW. A scope says which banks the later command must be in: the same bank, its bank group, its SID, the
  other SIDs, or any bank of the pseudo channel.
"""
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from rtl.params import Params, require_at_least, require_choice

from .mapping import DEFAULT_MAPPING, decode, field_order
from .timing import DramTiming

ACT, PRE, RD, WR, PREA, REF = "ACT", "PRE", "RD", "WR", "PREA", "REF"
COMMANDS = (ACT, PRE, RD, WR, PREA, REF)
SCHEDULINGS = ("frfcfs", "fcfs")


@dataclass(frozen=True)
class DRAMControllerParams(Params):
    queue_depth: int = 32
    """Requests waiting for their column command: DRAMSim3's `trans_queue_size` for HBM2 ([DS3])."""
    scheduling: str = "frfcfs"
    age_cap: int = 256
    """Starvation control of `frfcfs`: once the oldest queued request has waited this many tCK, commands go in
    arrival order until it has issued. Without it a request that is never first ready waits as long as younger
    ones keep being ready: a write behind a stream of reads (each read renews the read-to-write turnaround), a
    row miss behind endless hits. Our assumption, not a standard's: four rows' worth of data-bus time (32 bursts
    x `bl` 2 tCK each), long enough for FR-FCFS to batch a few rows' hits. Ramulator's FRFCFS_Cap bounds the
    hits a row may take ahead of older requests instead (16); its and DRAMSim3's controllers also buffer writes
    and drain them between watermarks, which this model does not (docs/dram.md)."""
    in_order: bool = True
    """Responses in arrival order (a block without response tags needs them so)."""
    mapping: str = DEFAULT_MAPPING

    def validate(self) -> None:
        require_at_least(self, "queue_depth", 1)
        require_at_least(self, "age_cap", 1)
        require_choice(self, "scheduling", SCHEDULINGS)
        field_order(self.mapping)


@dataclass(eq=False)
class DRAMRequest:
    """One burst. `payload` is the caller's, handed back with the response; the cycles are filled in as it goes."""
    address: int
    is_write: bool = False
    payload: Any = None
    arrival: int = -1
    column: int = -1
    """Cycle of its RD or WR command."""
    done: int = -1
    """Cycle its data has left the read data bus, or been written."""
    bank: int = field(default=-1, repr=False)
    row: int = field(default=-1, repr=False)


def constraints(t: DramTiming) -> list[tuple[str, str, str, int]]:
    """The command-to-command spacings of one pseudo channel ([R2-HBM3]'s `timing_constraints`, for the
    commands this controller issues)."""
    write_to_precharge = t.cwl + t.bl + t.wr
    return [
        ("channel", RD, RD, t.bl), ("channel", WR, WR, t.bl),                  # data bus occupancy
        ("channel", RD, WR, t.rtw), ("channel", WR, RD, t.cwl + t.bl + t.wtr_s),  # turnarounds
        ("channel", ACT, ACT, t.rrd_s), ("channel", PRE, PRE, t.ppd), ("channel", PRE, PREA, t.ppd),
        ("channel", RD, PREA, t.rtp), ("channel", WR, PREA, write_to_precharge), ("channel", ACT, PREA, t.ras),
        ("channel", PREA, ACT, t.rp),
        ("channel", ACT, REF, t.rc), ("channel", PRE, REF, t.rp), ("channel", PREA, REF, t.rp),
        ("channel", REF, ACT, t.rfc),
        ("sid", RD, RD, t.ccd_s), ("sid", WR, WR, t.ccd_s), ("other_sids", RD, RD, t.ccd_r),
        ("bankgroup", RD, RD, t.ccd_l), ("bankgroup", WR, WR, t.ccd_l), ("bankgroup", WR, RD, t.cwl + t.bl + t.wtr_l),
        ("bankgroup", ACT, ACT, t.rrd_l),
        ("bank", ACT, ACT, t.rc), ("bank", ACT, RD, t.rcd_rd), ("bank", ACT, WR, t.rcd_wr), ("bank", ACT, PRE, t.ras),
        ("bank", PRE, ACT, t.rp), ("bank", RD, PRE, t.rtp), ("bank", WR, PRE, write_to_precharge),
    ]


class PseudoChannel:
    """A pseudo channel and its controller. `accept` a request at the current cycle `now` (when `can_accept`),
    `step` to run one cycle. `commands` logs every command issued as (cycle, command, bank, row)."""

    def __init__(self, timing: DramTiming, params: DRAMControllerParams = DRAMControllerParams()) -> None:
        self.timing, self.params = timing, params
        self.now = 0
        self.queue: list[DRAMRequest] = []
        """Accepted, column command not yet issued; oldest first."""
        self.unanswered: list[DRAMRequest] = []
        """Accepted, response not yet handed back; oldest first."""
        self.commands: list[tuple[int, str, int, int]] = []
        self.open_row: list[int | None] = [None] * timing.banks
        per_sid, per_group = timing.bankgroups * timing.banks_per_group, timing.banks_per_group
        self._levels = [(0, bank // per_sid, bank // per_group, bank) for bank in range(timing.banks)]
        """For each bank, its index at each level: channel, SID, bank group (of all SIDs), bank."""
        counts = (1, timing.sids, timing.sids * timing.bankgroups, timing.banks)
        self._earliest = {command: tuple([0] * count for count in counts) for command in COMMANDS}
        """Per command, per level, per index at that level: the earliest cycle it may issue there."""
        self._activates: deque[int] = deque(maxlen=4)
        self._refresh_due = timing.refi
        self._effects = _effects(timing)

    # ---- requests in and out ------------------------------------------------------------------------
    def can_accept(self, requests: int = 1) -> bool:
        """The queue has room for `requests` more."""
        return len(self.queue) + requests <= self.params.queue_depth

    def accept(self, request: DRAMRequest) -> None:
        if not self.can_accept():
            raise RuntimeError(f"the queue of {self.params.queue_depth} requests is full")
        t = self.timing
        where = decode(request.address, t, self.params.mapping)
        request.bank = ((where.sid * t.bankgroups) + where.bankgroup) * t.banks_per_group + where.bank
        request.row, request.arrival = where.row, self.now
        self.queue.append(request)
        self.unanswered.append(request)

    def step(self) -> list[DRAMRequest]:
        """Issue this cycle's commands, then return the requests whose responses leave now; advance a cycle."""
        now = self.now
        if now >= self._refresh_due:
            self._refresh(now)
        else:
            self._issue_column(now)
            self._issue_row(now)
        leaving = self._leaving(now)
        self.now += 1
        return leaving

    def statistics(self) -> dict[str, int]:
        """Commands issued, by name."""
        counts = Counter(command for _, command, _, _ in self.commands)
        return {command: counts[command] for command in COMMANDS}

    # ---- scheduling ---------------------------------------------------------------------------------
    def _may_issue(self, command: str, bank: int, now: int) -> bool:
        _, sid, group, _ = self._levels[bank]
        at = self._earliest[command]
        return at[3][bank] <= now and at[2][group] <= now and at[1][sid] <= now and at[0][0] <= now

    def _in_order(self, now: int) -> bool:
        """Commands go in arrival order: `fcfs`, or `frfcfs` while the oldest request has waited `age_cap`."""
        return self.params.scheduling == "fcfs" or bool(self.queue) and now - self.queue[0].arrival >= \
            self.params.age_cap

    def _issue_column(self, now: int) -> None:
        in_order = self._in_order(now)
        for position, r in enumerate(self.queue):
            command = WR if r.is_write else RD
            if (self.open_row[r.bank] == r.row and self._may_issue(command, r.bank, now)
                    and not any(q.address == r.address and (q.is_write or r.is_write)
                                for q in self.queue[:position])):
                self._issue(now, command, r.bank, r.row)
                r.column = now
                r.done = now + self.timing.bl + (self.timing.cwl if r.is_write else self.timing.cl)
                del self.queue[position]
                return
            if in_order:
                return

    def _issue_row(self, now: int) -> None:
        """A row command for the oldest request of some bank: the oldest such request whose command may issue."""
        seen: set[int] = set()
        wanted = set() if self._in_order(now) else {(q.bank, q.row) for q in self.queue}
        may_activate = self._window_allows_activate(now)
        for r in self.queue:
            if r.bank in seen:
                continue
            seen.add(r.bank)
            open_row = self.open_row[r.bank]
            if open_row == r.row:
                continue
            if open_row is None:
                if may_activate and self._may_issue(ACT, r.bank, now):
                    self._issue(now, ACT, r.bank, r.row)
                    return
            elif (r.bank, open_row) not in wanted and self._may_issue(PRE, r.bank, now):
                self._issue(now, PRE, r.bank, open_row)
                return

    def _window_allows_activate(self, now: int) -> bool:
        """tFAW: at most four activates in any `faw` cycles."""
        return len(self._activates) < 4 or now >= self._activates[0] + self.timing.faw

    def _refresh(self, now: int) -> None:
        """PREA and REF address every bank: only constraints on the whole pseudo channel apply to them."""
        if any(row is not None for row in self.open_row):
            if self._earliest[PREA][0][0] <= now:
                self._issue(now, PREA, -1, -1)
        elif self._earliest[REF][0][0] <= now:
            self._issue(now, REF, -1, -1)
            self._refresh_due += self.timing.refi

    def _issue(self, now: int, command: str, bank: int, row: int) -> None:
        self.commands.append((now, command, bank, row))
        if command == ACT:
            self.open_row[bank] = row
            self._activates.append(now)
        elif command == PRE:
            self.open_row[bank] = None
        elif command == PREA:
            self.open_row = [None] * self.timing.banks
        levels = self._levels[bank] if bank >= 0 else (0,)
        for later, level, cycles, other_sids in self._effects[command]:
            earliest = self._earliest[later][level]
            if other_sids:
                for sid in range(len(earliest)):
                    if sid != levels[1] and earliest[sid] < now + cycles:
                        earliest[sid] = now + cycles
            elif earliest[levels[level]] < now + cycles:
                earliest[levels[level]] = now + cycles

    def _leaving(self, now: int) -> list[DRAMRequest]:
        if self.params.in_order:
            count = 0
            for r in self.unanswered:
                if not 0 <= r.done <= now:
                    break
                count += 1
            leaving, self.unanswered = self.unanswered[:count], self.unanswered[count:]
            return leaving
        leaving = sorted((r for r in self.unanswered if 0 <= r.done <= now), key=lambda r: r.done)
        if leaving:
            self.unanswered = [r for r in self.unanswered if not 0 <= r.done <= now]
        return leaving


LEVELS = {"channel": 0, "sid": 1, "other_sids": 1, "bankgroup": 2, "bank": 3}
"""The level a scope's constraint is kept at (channel, SID, bank group, bank); `other_sids` applies to every SID
but the issuing one."""


def _effects(t: DramTiming) -> dict[str, list[tuple[str, int, int, bool]]]:
    """For each command, the (later command, level, cycles, whether it is for the other SIDs) it imposes."""
    effects: dict[str, list[tuple[str, int, int, bool]]] = {command: [] for command in COMMANDS}
    for scope, earlier, later, cycles in constraints(t):
        effects[earlier].append((later, LEVELS[scope], cycles, scope == "other_sids"))
    return effects

"""Decoding sequences advanced in closed form: what the serving simulator skips.

A replica's iteration (:class:`graphs.serving.sim.engine.Replica`) touches every running sequence:
a decoding one takes one token, sometimes a new KV block, and after the iteration has one more
token computed and generated. Under load a replica runs hundreds of such sequences and admits or
finishes about one per iteration, so nearly all of that work repeats what the last iteration did.

A sequence that decodes steadily from iteration ``j0`` on, with ``c0`` tokens computed,
``g0`` generated and ``b0`` blocks owned then (its own and its shared prefix's), is in closed
form at every later iteration ``j`` while it keeps decoding:

.. math::

    c(j) = c_0 + (j - j_0), \\qquad g(j) = g_0 + (j - j_0),

it needs a new block in iteration ``j`` exactly when ``c(j) + 1 > b`` blocks' tokens, i.e. at
``j_b = j_0 + b_0 s - c_0`` and every ``s`` iterations after (block size ``s``), and it emits
its last token in iteration ``j_c = j_0 + (o - g_0) - 1`` (``o`` output tokens). So the
replica keeps for the whole set only

* how many decode (``n``), the sum of their KV lengths in iteration ``j``:
  ``sum_i (c_i(j) + 1) = sum_i (c_{0i} - j_{0i} + 1) + n j`` (whole numbers: exact in any
  order), and of their outstanding tokens ``sum_i (p_i + o_i - c_i(j))``;
* the blocks they take in iteration ``j``: members whose ``j_b = j (mod s)`` once ``j_b`` is
  reached (a count per residue ``mod s``);
* who finishes in which iteration (a bucket per ``j_c``).

An iteration then costs the sequences that are not steady decodes (prefill chunks, admissions,
completions), not the batch. The closed form holds only while nothing but the steady decoding
happens to its members: the replica uses it in an iteration whose tokens all fit the token
budget and whose new blocks all fit the free ones (so nothing is cut, evicted or preempted);
otherwise every member's counters are written back (:meth:`LazyDecodes.materialise`) and the
iteration runs the per-sequence loop, which stays the reference (``simulate(..., skip=False)``
runs it alone; :mod:`tests.serving.test_skipping` checks both give the same times to 1e-9 s).
A sequence joins the set after an iteration that leaves it decoding with no prefix left to
register, not speculating and not handed to a decode instance.

When every running sequence is in the set and nothing can be admitted (an empty queue, or no
free sequence slot), the iterations up to the next event are pure decodes and the replica runs
them at once (:meth:`graphs.serving.sim.engine.Replica.decode_window`): ``k`` is the fewest of the
iterations before a member finishes, before the members' new blocks exceed the free ones
(:meth:`LazyDecodes.quiet_needs`) and before the first of them that would end at or after the
simulator's next event (an arrival, another replica's iteration, a KV transfer); their ``k``
times are one vectorised call of the step over the KV-length sums ``ctx_base + n j``
(:meth:`graphs.serving.step.mixed.MixedStep.decode_times`: each element the scalar path's operations
in its order, so equal bit for bit) and their end times the loop's running sum
(``numpy.cumsum`` adds one element at a time, as the loop does).

A data-parallel group's ranks (:class:`graphs.serving.sim.data_parallel.LockstepGroup`) are
replicas of their own and keep their steady decodes so too; the group sums each rank's batch with
the members it leaves out (one token each). The group runs a window when every rank with work is
in one (:meth:`~graphs.serving.sim.engine.Replica.window_plan`): its ``k`` is the fewest of the
ranks' and of the iterations ending before the next event, and iteration ``j`` takes the slowest
rank's vectorised share plus the stage at the group's tokens, which stay constant through the
window (every member decodes one token, none joins or leaves). Each rank's records are the
loop's; a predictor's ranks (no vectorised decode price) keep the closed form without windows.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Decoding", "LazyDecodes", "window_ends"]


class _Lengths(Protocol):
    @property
    def prompt(self) -> int: ...

    @property
    def output(self) -> int: ...


class Decoding(Protocol):
    """What the closed form reads and writes of a sequence (the scheduler's
    :class:`graphs.serving.sim.engine.Sequence`, which imports this module: a protocol, not an
    import back)."""

    computed: int
    generated: int
    blocks: int

    @property
    def req(self) -> _Lengths: ...


Sequence = TypeVar("Sequence", bound=Decoding)


class LazyDecodes(Generic[Sequence]):
    """The steady decoding sequences of one replica, in closed form (module doc).

    Parameters
    ----------
    block_size : int
        Tokens per KV block.
    """

    __slots__ = ("activate", "bs", "ctx_base", "finishing", "j", "members", "n", "out_base", "per_residue")

    def __init__(self, block_size: int) -> None:
        self.bs = block_size
        self.j = 0  #: the index of the iteration scheduled next (iterations finished so far)
        self.n = 0  #: members
        self.ctx_base = 0  #: sum of (c0 - j0 + 1): the KV lengths' sum is ctx_base + n j
        self.out_base = 0  #: sum of (prompt + output - c0 + j0): outstanding is out_base - n j
        #: member -> (j0, c0, g0, jb, jc)
        self.members: dict[Sequence, tuple[int, int, int, int, int]] = {}
        self.finishing: dict[int, list[Sequence]] = {}  #: jc -> members emitting their last token then
        self.activate: dict[int, int] = {}  #: jb -> members taking their first block then
        self.per_residue = [0] * block_size  #: members taking a block when j = r (mod s), once active

    def sum_ctx(self) -> int:
        """The members' KV lengths summed, the token of iteration :attr:`j` included."""
        return self.ctx_base + self.n * self.j

    def outstanding(self) -> int:
        """Tokens the members still have to generate and process (``remaining``), before :attr:`j`."""
        return self.out_base - self.n * self.j

    def blocks_needed(self) -> int:
        """New blocks the members take in iteration :attr:`j` (its first-block members counted in
        from here on: call once per iteration, before scheduling it)."""
        j = self.j
        r = j % self.bs
        a = self.activate.pop(j, 0)
        if a:
            self.per_residue[r] += a
        return self.per_residue[r]

    def join(self, s: Sequence, owned: int) -> bool:
        """Add a decoding sequence that owns ``owned`` blocks (its own and its prefix's), from
        iteration :attr:`j` on; False (not added) when its blocks do not cover its computed tokens.

        Parameters
        ----------
        s : Sequence
            The decoding sequence; its counters (computed and generated tokens) are read as of
            iteration :attr:`j`.
        owned : int
            The KV blocks it owns, its prefix's included (blocks, each of the set's block size in
            tokens).

        Returns
        -------
        bool
            True when added; False when ``owned`` blocks do not cover its computed tokens.
        """
        j0, c0, g0 = self.j, s.computed, s.generated
        jb = j0 + owned * self.bs - c0
        if jb < j0:
            return False
        jc = j0 + s.req.output - g0 - 1
        self.members[s] = (j0, c0, g0, jb, jc)
        self.n += 1
        self.ctx_base += c0 - j0 + 1
        self.out_base += s.req.prompt + s.req.output - c0 + j0
        self.finishing.setdefault(jc, []).append(s)
        if jb <= jc:  # it takes a block before it finishes
            self.activate[jb] = self.activate.get(jb, 0) + 1
        return True

    def _write_back(self, s: Sequence, upto: int) -> tuple[int, int, int, int, int]:
        """Set ``s``'s counters to what they are once iterations before ``upto`` ran."""
        m = self.members[s]
        j0, c0, g0, jb, _ = m
        dj = upto - j0
        s.computed = c0 + dj
        s.generated = g0 + dj
        if upto > jb:  # blocks taken at jb, jb + s, ... < upto
            s.blocks += (upto - 1 - jb) // self.bs + 1
        return m

    def finish(self) -> list[Sequence]:
        """The members that emitted their last token in iteration :attr:`j` (just run), out of the
        set with their counters written back, in joining order; then :attr:`j` moves on."""
        j = self.j
        gone = self.finishing.pop(j, None)
        if gone:
            for s in gone:
                j0, c0, _, jb, _ = self._write_back(s, j + 1)
                del self.members[s]
                self.n -= 1
                self.ctx_base -= c0 - j0 + 1
                self.out_base -= s.req.prompt + s.req.output - c0 + j0
                if jb <= j:
                    self.per_residue[jb % self.bs] -= 1
        self.j = j + 1
        return gone or []

    def quiet_needs(self, free_blocks: int, limit: int = 4096) -> list[int]:
        """The blocks the members take in each iteration from :attr:`j` on, as long as none of
        them finishes and their blocks stay within ``free_blocks`` (at most ``limit``
        iterations): the iterations a window may run in closed form. Nothing changes.

        Parameters
        ----------
        free_blocks : int
            The replica's free KV blocks now: the running total of new blocks must stay within it.
        limit : int
            The most iterations looked ahead (default 4096).

        Returns
        -------
        list of int
            The new blocks taken in each iteration from :attr:`j` on, one entry per iteration;
            empty when no member is set to finish.
        """
        if not self.finishing:
            return []
        stop = min(min(self.finishing), self.j + limit)
        per = self.per_residue[:]
        out: list[int] = []
        total = 0
        for j in range(self.j, stop):
            r = j % self.bs
            per[r] += self.activate.get(j, 0)
            total += per[r]
            if total > free_blocks:
                break
            out.append(per[r])
        return out

    def advance(self, k: int) -> None:
        """Move on ``k`` iterations in which no member finishes (their blocks taken by the
        caller, :meth:`quiet_needs`).

        Parameters
        ----------
        k : int
            How many iterations to move on (iterations, at most ``len(quiet_needs(...))``).
        """
        for j in range(self.j, self.j + k):
            a = self.activate.pop(j, 0)
            if a:
                self.per_residue[j % self.bs] += a
        self.j += k

    def materialise(self) -> None:
        """Write every member's counters back (as of :attr:`j`) and empty the set."""
        for s in self.members:
            self._write_back(s, self.j)
        self.members.clear()
        self.finishing.clear()
        self.activate.clear()
        self.per_residue = [0] * self.bs
        self.n = self.ctx_base = self.out_base = 0


def window_ends(now: float, t: Any, n: int = 0, frontend: tuple[float, float] | None = None) -> Any:
    """The end times of a decode window's iterations from ``now``: the running sum of their
    engine times, one addition at a time as the event loop adds them, and with a shared front end
    each no sooner than the front end has drained the iteration before
    (:func:`~graphs.serving.engines.knobs.frontend_end_s`):

    .. math::

        E_j = \\max(E_{j-1} + t_j,\\; F_{j-1}), \\qquad F_j = E_j + n f, \\qquad E_0 = \\text{now}

    Parameters
    ----------
    now : float
        When the window starts (s).
    t : numpy.ndarray
        Each iteration's engine time (s).
    n : int
        Output tokens each iteration emits (one per steady decode).
    frontend : tuple of (float, float), optional
        ``(F_0, f)``: when the front end has drained the iteration before the window (s) and its
        seconds per token; None: no front end.

    Returns
    -------
    numpy.ndarray
        The iterations' end times (s).

    >>> import numpy as np
    >>> window_ends(1.0, np.array([0.5, 0.5])).tolist()
    [1.5, 2.0]
    >>> window_ends(1.0, np.array([0.5, 0.5]), 4, (1.75, 0.25)).tolist()
    [1.75, 2.75]
    """
    import numpy as np  # the simulator's own import: the scheduler alone needs none

    if frontend is not None:
        drained, per_token = frontend
        if drained - now > t[0] or bool((t[1:] < n * per_token).any()):  # the front end binds
            out, e = [], now
            for tj in t.tolist():  # frontend_end_s, one iteration at a time as the loop
                e = max(e + tj, drained)
                drained = e + n * per_token
                out.append(e)
            return np.asarray(out)
    return np.cumsum(np.concatenate(([now], t)))[1:]  # now + t1 + t2 ..., one addition at a time

"""Refits beside the search: a core of its own refits the likely final members while the search runs.

At the end of a timed search the final model refits its members on train+validation; what does not fit in the
time left stays fitted on the training part, and a member refitted on every row predicts better (measured on the
final members of timed searches, docs/results.md). With two or more cores, one core can do those refits while the
others search: after each recorded evaluation the search hands over the members the final model would hold if it
stopped there (heaviest first), and a thread of the driver refits, in the refit worker's process, those not
refitted yet whose refit fits in the time left. The search then keeps back only what is still to do, and the final
model mostly reads its members back.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Sequence

#: Seconds :meth:`BesideRefits.stop` waits for the refit in progress (it is cut at the deadline anyway).
STOP_WAIT_SECONDS = 3600.0


class BesideRefits:
    """Refit the members handed over by :meth:`want` in ``refitter``'s worker, from a thread of this process, until
    :meth:`stop`. ``predicted(obs)``: the refit's predicted seconds, as the refits ahead predict them. A newer
    list replaces an older one between two refits; a refit in progress always ends (at the deadline at the latest)."""

    def __init__(self, refitter, predicted: Callable[[Any], float]):
        self.refitter = refitter
        self.predicted = predicted
        self._wanted: Optional[List] = None
        self._fresh = threading.Event()
        self._stopped = False
        self._lock = threading.Lock()
        self.refits = 0
        self._thread = threading.Thread(target=self._run, name="optdiv-refits-beside", daemon=True)
        self._thread.start()

    def want(self, members: Sequence) -> None:
        """The members to refit now, in order (the final model's if the search stopped here, heaviest first)."""
        with self._lock:
            self._wanted = list(members)
        self._fresh.set()

    def stop(self) -> None:
        """Take no further member and wait for the refit in progress: the final model then reads back what is
        done and uses the worker alone."""
        self._stopped = True
        self._fresh.set()
        self._thread.join(STOP_WAIT_SECONDS)

    def _run(self) -> None:
        while True:
            self._fresh.wait()
            if self._stopped:
                return
            with self._lock:
                wanted, self._wanted = self._wanted, None
                self._fresh.clear()
            if not wanted:
                continue
            times = self.refitter.refit_ahead(wanted, self.predicted,
                                              give_up=lambda: self._stopped or self._fresh.is_set())
            self.refits += len(times)

"""Deadline handling for Python calls: one long-lived watchdog thread, armed per call.

At the deadline `interrupt()` is called, then again every INTERRUPT_REPEAT_S (code may swallow
one interrupt) until the call finishes. If it has not finished INTERRUPT_GRACE_S after the
deadline, `give_up()` runs (it reports `lost` and exits the kernel). interrupt() and give_up()
run under the same lock as disarm(), so once disarm() returned nothing reaches the next call,
and a call never gets both a result and `lost`.

This thread needs the GIL. C code that holds the GIL forever starves it; for that case
`faulthandler` (a C-level timer thread that needs no GIL) ends the process LAST_RESORT_S later.
The connection then closes without a result, which the gateway also treats as a lost session.
"""
import faulthandler
import threading
import time

INTERRUPT_GRACE_S = 2.0
INTERRUPT_REPEAT_S = 0.1
LAST_RESORT_S = 3.0


class Job:
    def __init__(self, timeout_s, interrupt, give_up):
        self.deadline = time.monotonic() + timeout_s
        self.interrupt = interrupt
        self.give_up = give_up
        self.fired = False


class Watchdog(threading.Thread):
    def __init__(self, log_file):
        super().__init__(name="codemode-watchdog", daemon=True)
        self._log_file = log_file
        self._cond = threading.Condition()
        self._job = None

    def arm(self, timeout_s, interrupt, give_up):
        """Watches the call that starts now; returns the Job (its `fired` says it timed out)."""
        faulthandler.dump_traceback_later(timeout_s + INTERRUPT_GRACE_S + LAST_RESORT_S, exit=True, file=self._log_file)
        with self._cond:
            self._job = Job(timeout_s, interrupt, give_up)
            self._cond.notify()
            return self._job

    def disarm(self):
        """The call finished: from here on the watchdog neither interrupts nor gives up."""
        with self._cond:
            self._job = None
            self._cond.notify()
        faulthandler.cancel_dump_traceback_later()

    def run(self):
        with self._cond:
            while True:
                job = self._job
                if job is None:
                    self._cond.wait()
                    continue
                late = time.monotonic() - job.deadline
                if late < 0:
                    self._cond.wait(-late)
                elif late < INTERRUPT_GRACE_S:
                    job.fired = True
                    job.interrupt()
                    self._cond.wait(INTERRUPT_REPEAT_S)
                else:
                    job.give_up()  # does not return: the kernel exits

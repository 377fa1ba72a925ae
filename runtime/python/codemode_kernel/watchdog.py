"""Deadline handling for Python calls: one long-lived watchdog thread, armed per call.

At the deadline `interrupt()` is called, then again every INTERRUPT_REPEAT_S (code may swallow
one interrupt) until the call finishes. If it has not finished INTERRUPT_GRACE_S after the
deadline, `give_up()` runs (it reports `lost` and exits the kernel). interrupt() and give_up()
run under the same lock as disarm(), so once disarm() returned nothing reaches the next call,
and a call never gets both a result and `lost`. The thread is woken only when a call's deadline
comes before the end of its current wait, so back-to-back calls cost it no wake-up.

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
        self._wakes_at = None  # when the thread's current wait ends; None: it waits for a notify

    def arm(self, timeout_s, interrupt, give_up):
        """Watches the call that starts now; returns the Job (its `fired` says it timed out)."""
        faulthandler.dump_traceback_later(timeout_s + INTERRUPT_GRACE_S + LAST_RESORT_S, exit=True, file=self._log_file)
        with self._cond:
            self._job = Job(timeout_s, interrupt, give_up)
            # Woken only when its current wait would end after this deadline: for calls that follow
            # each other the thread sleeps through (each wake-up is a thread switch on the call's path).
            if self._wakes_at is None or self._wakes_at > self._job.deadline:
                self._cond.notify()
            return self._job

    def disarm(self):
        """The call finished: from here on the watchdog neither interrupts nor gives up. The
        thread is not woken: it finds no job when its wait ends. The last-resort timer is still
        set; release() cancels it once the result is out."""
        with self._cond:
            self._job = None

    def release(self):
        """Cancels the last-resort timer of the call that ended (after its result was sent: the
        cancel waits for the timer's thread to end)."""
        faulthandler.cancel_dump_traceback_later()

    def run(self):
        with self._cond:
            while True:
                job = self._job
                if job is None:
                    self._wakes_at = None
                    self._cond.wait()
                    continue
                late = time.monotonic() - job.deadline
                if late < 0:
                    self._wakes_at = job.deadline
                    self._cond.wait(-late)
                elif late < INTERRUPT_GRACE_S:
                    job.fired = True
                    job.interrupt()
                    self._wakes_at = time.monotonic() + INTERRUPT_REPEAT_S
                    self._cond.wait(INTERRUPT_REPEAT_S)
                else:
                    job.give_up()  # does not return: the kernel exits

"""The daemon's side: results and status from its publish socket, read in a thread of their own.

A conflating Subscriber (sonopipe.subscriber) drains the socket on every read and keeps only the
newest message per topic, so the daemon's PUB socket never fills because of this viewer; what it
replaced is counted (`stats.skipped`), as are sequence gaps (`stats.missing`) and malformed
messages. Results are grouped per (pipeline, input frame) as sonopipe-view does (Grouper); every
complete group and every status goes to `on_group(group, context)` / `on_status(status)`, called
in this thread (the hub hands them over to the event loop).

On ``shm://<name>`` (the daemon's publish.shm pool, same host) results are read in place and
copied out of the slot once (the grouper keeps them past the next read, and the slot goes back
at once); the status heartbeat is not in the pool, so it comes from `status_endpoint` (the daemon's
ZeroMQ publish endpoint) when one is given.
"""
import logging
import threading
import time

import numpy as np

from sonopipe.shm import is_shm_endpoint
from sonopipe.subscriber import RESULT_TOPIC_PREFIX, STATUS_TOPIC, Subscriber
from sonopipe.view.cli import Context
from sonopipe.view.sources import Grouper

log = logging.getLogger("sonopipe.web")

IDLE_FLUSH_S = 0.2  # a pipeline's open result set is complete once nothing arrived for this long


class Intake:
    def __init__(self, endpoint, pipelines, on_group, on_status, status_endpoint=None):
        topics = [f"{RESULT_TOPIC_PREFIX}{p}/" for p in pipelines] or [RESULT_TOPIC_PREFIX]
        self.in_place = is_shm_endpoint(endpoint)
        self.subscriber = Subscriber(endpoint, topics + [STATUS_TOPIC], conflate=not self.in_place)
        self.status_subscriber = None
        if self.in_place and status_endpoint:
            self.status_subscriber = Subscriber(status_endpoint, [STATUS_TOPIC], conflate=True)
        self.stats = self.subscriber.stats
        self.errors = 0  # messages that raised while being grouped (logged)
        self._error_logged_at = 0.0
        self._on_group, self._on_status = on_group, on_status
        self._grouper = Grouper()
        self._context = Context(None, None)  # keeps the RF a pipeline publishes, for strain's B-mode
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sonopipe-web intake", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.subscriber.close()
        if self.status_subscriber is not None:
            self.status_subscriber.close()

    def _receive(self):
        """The next result or status, or None after IDLE_FLUSH_S without one."""
        if not self.in_place:
            return self.subscriber.receive(IDLE_FLUSH_S)
        deadline = time.monotonic() + IDLE_FLUSH_S
        while True:
            if self.status_subscriber is not None:
                status = self.status_subscriber.receive(0)
                if status is not None:
                    return status
            result = self.subscriber.receive(min(0.05, max(0.0, deadline - time.monotonic())))
            if result is not None:
                result.array = np.array(result.array, copy=True)  # out of the slot, which goes back now
                return result
            if time.monotonic() >= deadline:
                return None

    def _run(self):
        while not self._stop.is_set():
            result = self._receive()
            try:
                if result is None:
                    self._deliver(self._grouper.flush())
                elif result.topic == STATUS_TOPIC:
                    self._on_status(result.header)
                else:
                    self._deliver(self._grouper.add(result))
            except Exception:  # one odd message must not stop the viewer's intake
                self.errors += 1
                now = time.monotonic()
                if now - self._error_logged_at >= 1.0:  # at most one line a second
                    self._error_logged_at = now
                    log.exception("intake: %s could not be taken in (%d so far)",
                                  result.topic if result is not None else "a result set", self.errors)

    def _deliver(self, groups):
        for group in groups:
            self._context.remember(group)
            self._on_group(group, self._context.frozen())

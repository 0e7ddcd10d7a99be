"""Conflation between the daemon and the browsers.

The hub keeps only the newest item per topic ("view/<pipeline>": a pipeline's latest complete
result set; "status": the daemon's latest status), each with a version number. A browser is sent
one message at a time and gets the next only after it acknowledged the previous one (drawn it);
then it gets the newest version of the topic it has waited on longest. A version replaced before a
browser took it is counted as conflated for that browser: a slow browser sees fewer, newer
images, and neither the daemon nor the other browsers wait for it. A result set is drawn (turned
into panels, render.py) at most once, in a worker thread, and only when a browser asks for it.

Everything here runs on the event loop's thread; Intake hands items over with
loop.call_soon_threadsafe.
"""
import asyncio
import itertools
import json
import logging
import time

from google.protobuf import json_format

from sonopipe.web.render import render_group

log = logging.getLogger("sonopipe.web")

STATUS_TOPIC = "status"
VIEW_TOPIC_PREFIX = "view/"


class Client:
    """One connected browser."""
    _numbers = itertools.count(1)

    def __init__(self, versions_now):
        self.number = next(self._numbers)
        self.ready = True                 # has acknowledged everything it was sent
        self.wake = asyncio.Event()
        self.sent = {topic: version - 1 for topic, version in versions_now.items()}  # newest counts as new
        self.taken_at = {}                # topic -> monotonic time of the last send (fairness)
        self.messages = 0
        self.conflated = 0                # versions replaced before this browser took them


class Hub:
    def __init__(self, executor, subscriber_stats, intake_errors=lambda: 0):
        self._executor = executor
        self._subscriber_stats = subscriber_stats
        self._intake_errors = intake_errors
        self._items = {}        # topic -> (version, item): a (group, context) or a Status
        self._rendered = {}     # view topic -> (version, future of the JSON text)
        self._failed = {}       # view topic -> the version that could not be drawn
        self._version = itertools.count(1)
        self.clients = set()
        self.groups_received = 0
        self.groups_never_drawn = 0  # replaced before any browser asked for them
        self.render_errors = 0
        self.started = time.monotonic()

    # -- from the intake thread (through call_soon_threadsafe) --------------------------------------

    def put_group(self, group, context):
        self.groups_received += 1
        topic = VIEW_TOPIC_PREFIX + group.pipeline
        previous = self._items.get(topic)
        if previous is not None and self._rendered.get(topic, (None,))[0] != previous[0]:
            self.groups_never_drawn += 1
        self._put(topic, (group, context))

    def put_status(self, status):
        self._put(STATUS_TOPIC, status)

    def _put(self, topic, item):
        previous = self._items.get(topic)
        self._items[topic] = (next(self._version), item)
        for client in self.clients:
            if previous is not None and client.sent.get(topic, 0) < previous[0]:
                client.conflated += 1
            client.wake.set()

    # -- browsers -----------------------------------------------------------------------------------

    def join(self):
        client = Client({topic: version for topic, (version, _) in self._items.items()})
        self.clients.add(client)
        client.wake.set()
        return client

    def leave(self, client):
        self.clients.discard(client)

    def next_topic(self, client):
        """The topic with a version this browser has not taken, waited on longest; None if none."""
        waiting = [topic for topic, (version, _) in self._items.items() if version > client.sent.get(topic, 0)]
        if not waiting:
            return None
        return min(waiting, key=lambda topic: client.taken_at.get(topic, 0.0))

    async def message(self, client, topic):
        """The JSON text of `topic`'s newest version for `client` (marked as taken), or None when the
        result set could not be drawn."""
        version, item = self._items[topic]
        client.sent[topic] = version
        client.taken_at[topic] = time.monotonic()
        if topic == STATUS_TOPIC:
            return json.dumps({"type": "status", "status": json_format.MessageToDict(item),
                               "viewer": self.counters(client)})
        cached = self._rendered.get(topic)
        if cached is None or cached[0] != version:
            group, context = item
            future = asyncio.get_running_loop().run_in_executor(self._executor, _render_text, group, context, version)
            cached = self._rendered[topic] = (version, future)
        try:
            return await asyncio.shield(cached[1])
        except Exception as error:  # one result set that cannot be drawn must not end the viewer
            if self._failed.get(topic) != version:  # counted once, however many browsers asked
                self._failed[topic] = version
                self.render_errors += 1
                log.warning("%s version %d: cannot draw: %s", topic, version, error)
            return None

    def counters(self, client=None):
        stats = self._subscriber_stats
        counters = {"results_received": stats.received, "results_skipped_on_intake": stats.skipped,
                    "inputs_missing": stats.missing, "malformed": stats.malformed,
                    "result_sets": self.groups_received, "result_sets_never_drawn": self.groups_never_drawn,
                    "render_errors": self.render_errors, "intake_errors": self._intake_errors(),
                    "browsers": len(self.clients),
                    "conflated_all_browsers": sum(c.conflated for c in self.clients)}
        if client is not None:
            counters.update(browser=client.number, browser_messages=client.messages,
                            browser_conflated=client.conflated)
        return counters

    def skipped_per_topic(self):
        """{daemon topic: messages replaced on intake}, e.g. "status" while the machine was busy."""
        return dict(self._subscriber_stats.per_topic_skipped)

    def clients_counters(self):
        return [{"browser": c.number, "messages": c.messages, "conflated": c.conflated, "ready": c.ready}
                for c in sorted(self.clients, key=lambda c: c.number)]


def _render_text(group, context, version):
    view = render_group(group, context)
    view.update(type="view", version=version)
    return json.dumps(view, allow_nan=False)

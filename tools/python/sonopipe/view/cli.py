"""sonopipe-view: live window or PNG files of a daemon's results, or of a recording of them.

    sonopipe-view --endpoint tcp://127.0.0.1:5556                  live window, every pipeline
    sonopipe-view --endpoint ipc:///tmp/pub --png out/ --every 5   headless, every 5th result set
    sonopipe-view --recording results.h5 --png out/                offline, from sonopipe-record

Each pipeline gets the view of its chain (ARFI, strain, perfusion, Doppler; detected from its outputs, or
--chain), a status line with the result rate, latencies and counted skips. Live input is
conflated: when drawing is slower than the daemon, older results are skipped (and counted), the
daemon is never slowed down.
"""
import argparse
import logging
import os
import sys
import time

import numpy as np

from sonopipe._version import __version__
from sonopipe.recording import read_recording
from sonopipe.view import arfi, bmode, doppler, generic, perfusion, strain
from sonopipe.view.overlay import PipelineMeter
from sonopipe.view.sources import Grouper, LiveSource, RecordingSource

# Tried in this order by --chain auto; the first whose accepts() holds for a pipeline's outputs wins.
VIEWS = {
    "perfusion": (perfusion.accepts, perfusion.PerfusionView),
    "doppler": (doppler.accepts, doppler.DopplerView),
    "strain": (strain.accepts, strain.StrainView),
    "arfi": (arfi.accepts, arfi.ArfiView),
    "generic": (generic.accepts, generic.GenericView),
}

log = logging.getLogger("sonopipe.view")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="sonopipe-view", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"sonopipe-view {__version__}")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--endpoint", help="the daemon's publish endpoint (live)")
    source.add_argument("--recording", help="HDF5 recording of results (sonopipe-record), offline")
    parser.add_argument("--frames", metavar="FILE", action="append", default=[],
                        help="raw recording of the input frames (e.g. sonopipe-sim's, as replayed): strain B-mode, "
                             "ARFI track times; repeatable (one per simulated stream)")
    parser.add_argument("--pipeline", action="append", default=[],
                        help="show only this pipeline (repeatable; default: all)")
    parser.add_argument("--png", metavar="DIR", help="write <pipeline>_<input sequence>.png files instead of a window")
    parser.add_argument("--every", type=int, default=1, metavar="N", help="draw every Nth result set per pipeline")
    parser.add_argument("--max-images", type=int, default=None, metavar="N", help="stop a pipeline after N images")
    parser.add_argument("--chain", choices=["auto", *VIEWS], default="auto", help="view for every pipeline")
    parser.add_argument("--output", help="ARFI: the displacement output to show (default: the last stage's)")
    parser.add_argument("--location", type=int, help="ARFI: location index of the depth-time plot (default: peak)")
    parser.add_argument("--component", type=int, default=0, help="strain: component index (default 0, axial)")
    parser.add_argument("--lag", type=int, help="strain: frames between reference and target (default: result "
                                                "attribute 'lag', else 1)")
    parser.add_argument("--slice", type=int, help="perfusion: slice index of 3-D maps (default: middle)")
    parser.add_argument("--slice-shape", metavar="ROWSxCOLUMNS",
                        help="perfusion: layout of a flat voxel axis (default: the DCE frame's attribute "
                             "slice_shape, else square)")
    parser.add_argument("--idle-exit", type=float, metavar="S",
                        help="live: exit after S seconds without results (default: run until Ctrl-C)")
    parser.add_argument("--dpi", type=int, default=100)
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    options = parser.parse_args(argv)
    if options.every < 1:
        parser.error("--every must be >= 1")
    return options


class Context:
    """What views may use beyond the result group: the recording (raw frames), the options."""

    def __init__(self, recording, options, frames_recordings=()):
        self.recording = recording
        self.frames_recordings = list(frames_recordings)
        self.options = options
        self._published_frames = {}  # (stream, input sequence) -> (ResultHeader, array), the last few

    def remember(self, group):
        """Keeps input frames a pipeline publishes itself for later groups' views: a `convert` stage
        with publish: true (an output name ending in "converted", real values: the RF) or a beamformed
        image (bmode.is_beamformed: the beamform stage with publish: true, RF or IQ)."""
        for name, result in group.outputs.items():
            if result.array is None:
                continue
            if (name.endswith("converted") and not np.iscomplexobj(result.array)) or bmode.is_beamformed(name):
                self._published_frames[(group.stream_id, group.input_sequence)] = (result.header, result.array)
        while len(self._published_frames) > 16:
            self._published_frames.pop(next(iter(self._published_frames)))

    def frozen(self):
        """A copy whose kept frames no longer change: for drawing in another thread (sonopipe-web)
        while this one goes on remembering."""
        copy = Context(self.recording, self.options, self.frames_recordings)
        copy._published_frames = dict(self._published_frames)
        return copy

    def input_frame(self, stream_id, sequence):
        """(header, array) of input frame `sequence` of `stream_id`: from the results recording's or
        the --frames recording's raw frames (FrameHeader), else as the pipeline published it
        (ResultHeader), else None. Results carry no frame side vectors (ensemble times) and no raw
        RF, so views look here for them."""
        for recording in [self.recording, *self.frames_recordings]:
            if recording is None or stream_id not in recording.streams:
                continue
            stream = recording.streams[stream_id]
            matches = np.flatnonzero(stream.sequence == sequence)
            if matches.size:
                return stream.frame(int(matches[0]))
        return self._published_frames.get((stream_id, sequence))


class Viewer:
    def __init__(self, options, live_source):
        self.options = options
        self.live = live_source
        self.views = {}    # pipeline -> view object
        self.meters = {}   # pipeline -> PipelineMeter
        self.figures = {}  # pipeline -> matplotlib figure (window mode)
        self.images = {}   # pipeline -> images written
        self.errors = 0
        self.incomplete = 0  # groups the pipeline's view could not draw (outputs missing)

    def view_for(self, group):
        """The pipeline's view, or None when this group lacks what it draws (a live group cut short
        by conflation). Auto: the first chain view that accepts; a pipeline first shown by the
        generic view moves to a chain view as soon as one accepts a group of it."""
        view = self.views.get(group.pipeline)
        if view is None or (self.options.chain == "auto" and view.name == "generic"):
            name = self.options.chain
            if name == "auto":
                name = next(n for n, (accepts, _) in VIEWS.items() if accepts(group))
            if view is None or name != view.name:
                view = self.views[group.pipeline] = VIEWS[name][1](self.options)
                log.info("pipeline '%s': %s view (outputs %s)", group.pipeline, name, sorted(group.outputs))
        if not VIEWS[view.name][0](group):
            self.incomplete += 1
            return None
        return view

    def show(self, group, context, stats):
        import matplotlib.pyplot as plt
        context.remember(group)
        meter = self.meters.setdefault(group.pipeline, PipelineMeter(self.live))
        meter.add(group)
        if (meter.groups - 1) % self.options.every:
            return
        if self.options.max_images is not None and self.images.get(group.pipeline, 0) >= self.options.max_images:
            return
        view = self.view_for(group)
        if view is None:
            return
        if self.options.png:
            fig = plt.figure(figsize=view.figure_size, layout="constrained")
        else:
            fig = self.figures.get(group.pipeline)
            if fig is None or not plt.fignum_exists(fig.number):
                fig = plt.figure(figsize=view.figure_size, layout="constrained")
                self.figures[group.pipeline] = fig
            fig.clf()
        try:
            view.draw(fig, group, context)
        except Exception:  # one bad result set must not end a live display; counted and logged
            self.errors += 1
            log.exception("pipeline '%s' input #%d: drawing failed", group.pipeline, group.input_sequence)
            if self.options.png:
                plt.close(fig)
            return
        fig.supxlabel(meter.text(group, stats), fontsize=8, family="monospace")
        if self.options.png:
            path = os.path.join(self.options.png, f"{group.pipeline}_{group.input_sequence:06d}.png")
            fig.savefig(path, dpi=self.options.dpi)
            plt.close(fig)
        else:
            fig.canvas.draw_idle()
            plt.pause(0.001)
        self.images[group.pipeline] = self.images.get(group.pipeline, 0) + 1


def run(options):
    import matplotlib
    if options.png:
        matplotlib.use("Agg")
        os.makedirs(options.png, exist_ok=True)
    elif not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY") and sys.platform.startswith("linux"):
        log.error("no display for a live window: use --png DIR")
        return 2
    topics = [f"result/{p}/" for p in options.pipeline] or ["result/"]
    if options.recording:
        source = RecordingSource(options.recording)
        grouper = Grouper(source.known_outputs())
    else:
        source = LiveSource(options.endpoint, topics, options.idle_exit)
        grouper = Grouper()
    viewer = Viewer(options, live_source=options.endpoint is not None)
    context = Context(source.recording, options, [read_recording(path) for path in options.frames])
    wanted = set(options.pipeline)
    started = time.monotonic()
    try:
        for result in source.results():
            done = grouper.flush() if result is None else grouper.add(result)
            for group in done:
                if not wanted or group.pipeline in wanted:
                    viewer.show(group, context, source.stats)
            if result is None and not options.png:
                import matplotlib.pyplot as plt
                plt.pause(0.05)  # keep the window responsive while idle
        for group in grouper.flush():
            if not wanted or group.pipeline in wanted:
                viewer.show(group, context, source.stats)
    except KeyboardInterrupt:
        pass
    finally:
        source.close()
    elapsed = time.monotonic() - started
    for pipeline, meter in sorted(viewer.meters.items()):
        print(f"sonopipe-view: {pipeline}: {meter.groups} result sets, {viewer.images.get(pipeline, 0)} images "
              f"({type(viewer.views.get(pipeline)).__name__ if pipeline in viewer.views else 'no'} view)")
    if source.stats is not None:
        stats = source.stats
        print(f"sonopipe-view: received {stats.received}, skipped {stats.skipped} (conflation), "
              f"missing {stats.missing} in {stats.gaps} gaps, malformed {stats.malformed}, {elapsed:.1f} s")
    if options.png:
        print(f"sonopipe-view: images in {os.path.abspath(options.png)}")
    if viewer.incomplete:
        print(f"sonopipe-view: {viewer.incomplete} result sets lacked outputs their view draws (not drawn)")
    if viewer.errors:
        print(f"sonopipe-view: {viewer.errors} result sets could not be drawn (see the log)", file=sys.stderr)
        return 1
    if not viewer.meters:
        print("sonopipe-view: no results", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    options = parse_arguments(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=getattr(logging, options.log_level.upper()),
                        format="sonopipe-view %(levelname)s: %(message)s")
    np.seterr(all="ignore")  # NaN windows (zero energy) are expected in maps
    try:
        return run(options)
    except Exception as error:  # e.g. a recording that is not one: one line, non-zero exit
        log.error("%s", error)
        return 1

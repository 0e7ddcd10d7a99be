"""sonopipe-web: the live browser viewer of a running sonopiped.

    sonopipe-web --endpoint tcp://127.0.0.1:5556             http://127.0.0.1:8088/, every pipeline
    sonopipe-web --endpoint ipc:///tmp/pub --port 0          an ephemeral port (the URL is printed)
    sonopipe-web --endpoint shm://results --status-endpoint tcp://127.0.0.1:5556   same host, read in place

Subscribes to the daemon's results (result/<pipeline>/<output>) and status, and serves one page
drawing per pipeline its latest images (ARFI peak displacement and depth-time, strain with
B-mode, perfusion maps) with axes, colour bars and units, the daemon's status and the drops.
Conflated: each browser gets the newest result set when it has drawn the previous one; what it
missed is counted; the daemon never waits for a browser. Binds 127.0.0.1 unless --host says
otherwise (the page has no authentication: keep it on loopback, or behind an SSH tunnel).
"""
import argparse
import asyncio
import concurrent.futures
import ipaddress
import logging
import signal
import sys

from sonopipe._version import __version__
from sonopipe.web.hub import Hub
from sonopipe.web.intake import Intake

log = logging.getLogger("sonopipe.web")

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5556"  # publish.endpoint of config/demo.yaml
DEFAULT_CONTROL = "tcp://127.0.0.1:5557"  # control.endpoint of config/demo.yaml
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8088


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="sonopipe-web", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"sonopipe-web {__version__}")
    parser.add_argument("--endpoint", default=DEFAULT_ENDPOINT,
                        help=f"the daemon's publish endpoint (default {DEFAULT_ENDPOINT}), or its publish.shm pool "
                             "shm://<name> on the same host (results read in place)")
    parser.add_argument("--status-endpoint", default=None,
                        help="with an shm:// --endpoint: the daemon's ZeroMQ publish endpoint, for the status "
                             "heartbeat (the pool carries results only)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to serve the page on (default {DEFAULT_HOST}, this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"HTTP port (default {DEFAULT_PORT}; 0: any free port, printed)")
    parser.add_argument("--control", default=DEFAULT_CONTROL,
                        help=f"the daemon's control endpoint, for the live-parameter controls (default {DEFAULT_CONTROL}; "
                             "'' shows no controls)")
    parser.add_argument("--pipeline", action="append", default=[],
                        help="show only this pipeline (repeatable; default: all)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    options = parser.parse_args(argv)
    if not 0 <= options.port <= 65535:
        parser.error(f"--port {options.port} is not a TCP port (0..65535)")
    return options


def _is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(options):
    from aiohttp import web  # imported here: a missing python3-aiohttp is reported by main in one line

    from sonopipe.web.server import make_application

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, stopping.set)

    # One drawing thread: result sets are drawn one at a time, off the event loop.
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sonopipe-web render")
    intake = Intake(options.endpoint, options.pipeline,
                    on_group=lambda group, context: loop.call_soon_threadsafe(hub.put_group, group, context),
                    on_status=lambda status: loop.call_soon_threadsafe(hub.put_status, status),
                    status_endpoint=options.status_endpoint)
    hub = Hub(executor, intake.stats, lambda: intake.errors)
    control = None
    if options.control:
        from sonopipe.control import Control
        control = Control(options.control, timeout_s=2.0)
    runner = web.AppRunner(make_application(hub, control), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, options.host, options.port)
        await site.start()
        port = runner.addresses[0][1]  # the port chosen when --port 0
        host = f"[{options.host}]" if ":" in options.host else options.host
        if not _is_loopback(options.host):
            log.warning("serving on %s: anyone who can reach it sees the results (no authentication)%s", options.host,
                        " and can change live parameters (--control '' to refuse)" if control else "")
        intake.start()
        print(f"sonopipe-web: viewer at http://{host}:{port}/ (results from {options.endpoint})", flush=True)
        await stopping.wait()
    finally:
        await runner.cleanup()
        intake.stop()
        executor.shutdown(wait=True, cancel_futures=True)
    counters = hub.counters()
    print(f"sonopipe-web: {counters['result_sets']} result sets from {counters['results_received']} messages, "
          f"{counters['results_skipped_on_intake']} skipped on intake (conflation), "
          f"{counters['result_sets_never_drawn']} never drawn, {counters['inputs_missing']} inputs missing, "
          f"{counters['malformed']} malformed, {counters['render_errors']} could not be drawn, "
          f"{counters['intake_errors']} failed on intake", flush=True)
    return 0


def main(argv=None):
    options = parse_arguments(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=getattr(logging, options.log_level.upper()),
                        format="sonopipe-web %(levelname)s: %(message)s")
    try:
        return asyncio.run(serve(options))
    except ModuleNotFoundError as error:
        log.error("%s: install python3-aiohttp (tools/install-deps.sh)", error)
        return 2
    except OSError as error:  # e.g. the port is taken
        log.error("cannot serve on %s port %d: %s", options.host, options.port, error)
        return 1

"""sonopipe-web, the live browser viewer (run as `sonopipe-web` or `python -m sonopipe.web`).

cli.py: arguments, start and stop; intake.py: the daemon's results and status (a conflating
Subscriber in its own thread, result sets grouped per input frame); hub.py: the newest item per
topic and, per browser, what it has taken (conflation, counted); server.py: HTTP and WebSocket
(aiohttp); render.py: a result set -> panels (quantised images, axes, colour bars);
colormaps.py: the colour tables; static/: the page (HTML, JS, CSS; no external code).
"""

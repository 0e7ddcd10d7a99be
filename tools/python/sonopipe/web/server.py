"""HTTP and WebSocket (aiohttp): the page and its files, the colour tables, the viewer's counters,
and /ws, where each browser gets the hub's newest views and status one message at a time.

    GET /                 the page (static/index.html)
    GET /static/<file>    its script and style sheet
    GET /colormaps.json   colour tables (colormaps.py)
    GET /stats.json       the viewer's counters, per browser and per daemon topic too (conflation)
    GET /ws               WebSocket: server -> page {"type": "view" | "status", ...};
                          page -> server {"type": "ack"} once it has drawn the last message
    GET /controls.json    {"enabled": bool}: whether this viewer may change live parameters
    POST /parameters      {"name": "<pipeline>.<stage>.<parameter>", "value": ...} -> the daemon's
                          answer {"ok", "error", "generation", "value"} through this server's control
                          connection (docs/live-parameters.md); the live parameters themselves, with
                          their ranges and units, come with every status
"""
import asyncio
import json
import logging
import os

from aiohttp import WSCloseCode, WSMsgType, web

from sonopipe.web import colormaps

log = logging.getLogger("sonopipe.web")

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")


def make_application(hub, control=None):
    """`control`: a sonopipe.Control of the daemon (None: the page shows no controls)."""
    application = web.Application()
    application["hub"] = hub
    application["control"] = control
    application["colormaps"] = json.dumps(colormaps.tables())
    application["sockets"] = set()
    application.on_shutdown.append(_close_sockets)
    application.router.add_get("/", _index)
    application.router.add_get("/colormaps.json", _colormaps)
    application.router.add_get("/stats.json", _stats)
    application.router.add_get("/ws", _websocket)
    application.router.add_get("/controls.json", _controls)
    application.router.add_post("/parameters", _set_parameter)
    application.router.add_static("/static/", STATIC_DIR)
    return application


async def _index(request):
    return web.FileResponse(os.path.join(STATIC_DIR, "index.html"), headers={"Cache-Control": "no-cache"})


async def _colormaps(request):
    return web.Response(text=request.app["colormaps"], content_type="application/json")


async def _stats(request):
    hub = request.app["hub"]
    return web.json_response({**hub.counters(), "per_browser": hub.clients_counters(),
                              "skipped_on_intake_per_topic": hub.skipped_per_topic()})


async def _controls(request):
    return web.json_response({"enabled": request.app["control"] is not None})


async def _set_parameter(request):
    """One `set` on the daemon's control socket, off the event loop (it waits for the reply)."""
    control = request.app["control"]
    if control is None:
        return web.json_response({"ok": False, "error": "this viewer has no control connection (--control)"})
    try:
        body = await request.json()
        name, value = str(body["name"]), body["value"]
    except (ValueError, KeyError, TypeError):
        return web.json_response({"ok": False, "error": 'expected {"name": ..., "value": ...}'}, status=400)
    from sonopipe.control import ControlError, yaml_text
    loop = asyncio.get_running_loop()
    try:
        reply = await loop.run_in_executor(None, control.request, "set", name, yaml_text(value))
    except ControlError as error:
        log.info("set %s = %s refused: %s", name, value, error)
        return web.json_response({"ok": False, "error": str(error).split(": ", 1)[-1]})
    parameter = reply.parameters[0]
    log.info("set %s = %s (generation %d)", parameter.name, parameter.value, reply.generation)
    return web.json_response({"ok": True, "generation": reply.generation, "value": parameter.value})


async def _websocket(request):
    hub = request.app["hub"]
    socket = web.WebSocketResponse(heartbeat=30.0)
    await socket.prepare(request)
    client = hub.join()
    request.app["sockets"].add(socket)
    log.info("browser %d connected from %s", client.number, request.remote)
    sender = asyncio.create_task(_send(hub, client, socket))
    try:
        async for message in socket:
            if message.type == WSMsgType.TEXT and _is_ack(message.data):
                client.ready = True
                client.wake.set()
            elif message.type == WSMsgType.ERROR:
                break
    finally:
        sender.cancel()
        hub.leave(client)
        request.app["sockets"].discard(socket)
        log.info("browser %d left (%d messages, %d conflated)", client.number, client.messages, client.conflated)
    return socket


async def _close_sockets(application):
    """On stop: tells every page the server is going away (else their handlers keep the server up)."""
    for socket in list(application["sockets"]):
        await socket.close(code=WSCloseCode.GOING_AWAY, message=b"sonopipe-web stopping")


def _is_ack(text):
    try:
        return json.loads(text).get("type") == "ack"
    except (ValueError, AttributeError):
        return False


async def _send(hub, client, socket):
    """Sends this browser the next newest item whenever it is ready; at most one unacknowledged
    message is on its way, so a slow browser holds back nothing but itself."""
    try:
        while True:
            await client.wake.wait()
            client.wake.clear()
            while client.ready:
                topic = hub.next_topic(client)
                if topic is None:
                    break
                text = await hub.message(client, topic)
                if text is None:
                    continue
                client.ready = False
                client.messages += 1
                await socket.send_str(text)
    except (ConnectionResetError, RuntimeError) as error:  # the browser went away mid-send
        log.info("browser %d: %s", client.number, error)

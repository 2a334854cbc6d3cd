"""The dashboard's web application (Starlette): the page, its event stream, images, /metrics, control.

| route | what |
| --- | --- |
| ``GET /`` | the page (``static/index.html``; every script and style ships in the package) |
| ``GET /events`` | server-sent events: the page's state as one JSON object per update |
| ``GET /api/state`` | the same state, once |
| ``GET /images/<name>.png`` | an image of the latest scan (a detector's by name, ``com_x``, ... ``diffraction``); ``?scan=N``: of scan N of the history, from its file |
| ``GET /api/scans/<scan>/images`` | what the page draws a past scan's images with (names, labels, colour bars' ranges), read from its file |
| ``GET /thumbnails/<scan>.png`` | a scan's first detector image, small, for a file the dashboard read (history) |
| ``GET /metrics`` | Prometheus text format |
| ``GET /healthz`` | ``ok`` once serving (what ``sectorflow up`` waits for) |
| ``POST /api/scans`` | request a scan (operator token) |
| ``POST /api/sessions``, ``POST /api/sessions/<id>/cancel`` | submit, cancel a streaming session (operator token) |

With ``[security]`` on, every read but ``/healthz`` is for a loopback client or one that shows the
viewer's token (``[dashboard] view_token_file``; the control token also does): as
``Authorization: Bearer <token>``, or the cookie that ``GET /?token=<token>`` sets (a page's event
stream cannot send a header). Anything else is answered 401 and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, Counter, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sectorflow.configs import Config
from sectorflow.configs.loader import is_loopback
from sectorflow.errors import SectorflowError

from .control import Controller, Refused, read_token
from .follower import Follower
from .metrics import make_registry
from .png import array_png
from .sessions import SessionWatcher

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
# An event stream sends a comment this often when nothing changed, so proxies keep it open and a
# page learns soon when the dashboard itself went away.
KEEPALIVE_S = 10.0
# How long the browser waits before reconnecting a dropped event stream (the SSE "retry" field).
RETRY_MS = 1000
#: The cookie that carries the viewer's token for a browser (set by ``GET /?token=...``).
TOKEN_COOKIE = "sectorflow_token"


def create_app(config: Config) -> Starlette:
    """The application for ``config``; its lifespan connects to the kvstore and follows it."""
    controller = Controller(config, read_token(config))
    # Who may read with [security] on: these tokens, or a client on this host.
    read_tokens = [t for t in (read_token(config, "view_token_file"), read_token(config)) if t is not None]
    guard_reads = config.security.enabled
    sessions = SessionWatcher()
    # The collector reads the follower's latest snapshot at each scrape; the follower, made next,
    # feeds the scan-duration histogram at each update.
    registry, durations = make_registry(lambda: follower.snapshot.entries, lambda: follower.snapshot.reachable)
    follower = Follower(config, extra=lambda: {"sessions": sessions.snapshot(), "control": controller.enabled},
                        on_scans=durations.observe)
    refused_requests = Counter("sectorflow_dashboard_refused_requests", "operator requests the dashboard refused, "
                               "by HTTP status (400 bad body, 401 token, 403 read-only, 413 body too large)",
                               ["status"], registry=registry)
    refused_reads = Counter("sectorflow_dashboard_refused_reads", "reads refused for want of the viewer's token "
                            "([security] on, a client not on loopback)", registry=registry)
    refusals_logged: set[int] = set()

    def token_of(request: Request) -> str | None:
        scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and given:
            return given.strip()
        return request.cookies.get(TOKEN_COOKIE) or request.query_params.get("token")

    def may_read(request: Request) -> bool:
        if not guard_reads or (request.client is not None and is_loopback(request.client.host)):
            return True
        given = token_of(request)
        return given is not None and valid(given)

    def valid(given: str) -> bool:
        return any(hmac.compare_digest(given.encode(), t.encode()) for t in read_tokens)

    def reader(handler: Any) -> Any:
        async def guarded(request: Request) -> Response:
            if not may_read(request):
                refused_reads.inc()
                if 0 not in refusals_logged:
                    refusals_logged.add(0)
                    log.warning("refused a read from %s without the viewer's token; further ones are counted in "
                                "/metrics", request.client.host if request.client else "?")
                return PlainTextResponse("the viewer's token is needed: 'Authorization: Bearer <token>' or "
                                         "/?token=<token> ([dashboard] view_token_file)", status_code=401)
            response = await handler(request)
            given = request.query_params.get("token")
            if given is not None and guard_reads and valid(given):  # a browser keeps it for the event stream
                response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict",
                                    secure=request.url.scheme == "https")
            return response

        return guarded

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        follower.open()
        controller.open()
        sessions.start()
        task = asyncio.create_task(follower.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            sessions.stop()
            controller.close()
            follower.close()

    async def page(_request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html")

    async def state(_request: Request) -> Response:
        return Response(follower.snapshot.json, media_type="application/json")

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            yield f"retry: {RETRY_MS}\n\n"
            version = -1
            while not await request.is_disconnected():
                snapshot = await follower.wait_newer(version, KEEPALIVE_S)
                if snapshot.version == version:
                    yield ": keepalive\n\n"
                    continue
                version = snapshot.version
                yield f"id: {version}\ndata: {snapshot.json}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def past(scan: int) -> Any:
        """Scan ``scan`` of the history, its images from its file; or a 404 saying why not."""
        try:
            return await asyncio.to_thread(follower.past_images, scan)
        except (LookupError, SectorflowError) as error:
            return PlainTextResponse(str(error), status_code=404)

    async def past_images(request: Request) -> Response:
        view = await past(request.path_params["scan"])
        if isinstance(view, Response):
            return view
        return JSONResponse(follower.payload(view, version=0))

    async def image(request: Request) -> Response:
        name = request.path_params["name"]
        scan = request.query_params.get("scan")
        if scan is not None and not scan.isdigit():
            return PlainTextResponse(f"scan={scan!r}: a scan number is a whole number", status_code=400)
        view = follower.images.latest() if scan is None else await past(int(scan))
        if isinstance(view, Response):
            return view
        if view is None:
            return PlainTextResponse("no scan with a counted file yet", status_code=404)
        picture = view.picture(name)
        if picture is None:
            return PlainTextResponse(f"no image {name!r}; there are: {', '.join(sorted([*view.images, *view.sums]))}",
                                     status_code=404)
        data, log_scale = picture
        png = view.pngs.get(name)
        if png is None:  # two pages asking at once may both encode it: the same bytes
            png = view.pngs[name] = await asyncio.to_thread(array_png, data, log_scale, diverging=view.diverging(name))
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})

    async def thumbnail(request: Request) -> Response:
        summary = follower.images.summaries().get(request.path_params["scan"])
        if summary is None:
            return PlainTextResponse("no thumbnail of that scan: its file was not read by this dashboard",
                                     status_code=404)
        return Response(summary.thumbnail, media_type="image/png", headers={"Cache-Control": "max-age=3600"})

    async def metrics(_request: Request) -> Response:
        body = await asyncio.to_thread(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def healthz(_request: Request) -> Response:
        return PlainTextResponse("ok")

    async def act(request: Request, action: Any, changes_sessions: bool = False) -> Response:
        try:
            controller.check(request.headers.get("authorization"))
            body = await _json_body(request)
            message = await asyncio.to_thread(action, body)
        except Refused as refused:
            refused_requests.labels(status=str(refused.status)).inc()
            if refused.status not in refusals_logged:  # once per kind: a guesser must not flood the log
                refusals_logged.add(refused.status)
                log.warning("refused an operator request (%d: %s); further ones are counted in /metrics",
                            refused.status, refused)
            return JSONResponse({"ok": False, "error": str(refused)}, status_code=refused.status)
        except SectorflowError as error:
            return JSONResponse({"ok": False, "error": str(error)}, status_code=409)
        if changes_sessions:  # the page shows the new session without waiting for the next squeue poll
            await asyncio.to_thread(sessions.refresh)
        return JSONResponse({"ok": True, "message": message})

    async def post_scan(request: Request) -> Response:
        return await act(request, controller.request_scan)

    async def post_session(request: Request) -> Response:
        return await act(request, controller.submit_session, changes_sessions=True)

    async def cancel_session(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        return await act(request, lambda _body: controller.cancel_session(job_id), changes_sessions=True)

    routes = [
        Route("/", reader(page)),
        Route("/events", reader(events)),
        Route("/api/state", reader(state)),
        Route("/images/{name}.png", reader(image)),
        Route("/thumbnails/{scan:int}.png", reader(thumbnail)),
        Route("/api/scans/{scan:int}/images", reader(past_images)),
        Route("/metrics", reader(metrics)),
        Route("/healthz", healthz),
        Route("/api/scans", post_scan, methods=["POST"]),
        Route("/api/sessions", post_session, methods=["POST"]),
        Route("/api/sessions/{job_id}/cancel", cancel_session, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),  # the page's code: nothing to hide
    ]
    return Starlette(routes=routes, lifespan=lifespan)


#: Largest body of an operator request: a few fields of JSON.
MAX_BODY_BYTES = 16 * 1024


async def _json_body(request: Request) -> dict[str, Any]:
    # Read with a running cap: a chunked body has no length to check first.
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise Refused(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
    if not raw:
        return {}
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser's stack
        raise Refused(400, "the body is not JSON of finite numbers and a few levels") from None
    if not isinstance(body, dict):
        raise Refused(400, "the body must be a JSON object")
    return body


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a request may carry")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400
        raise ValueError(f"{text[:20]} is beyond a float")
    return number

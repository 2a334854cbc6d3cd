"""The web dashboard: the pipeline live in a browser, and its counters for Prometheus.

``sectorflow dashboard`` (``cli.py``) serves a Starlette application (``app.py``) with uvicorn. A
kvstore client follows the whole map (``follower.py``); every update becomes the page's state
(``view.py``: services, sessions (``sessions.py``), the scan in progress with its rate and time
left (``operations.progress``, as ``acquire --wait``), rates (``rates.py``), the scans' history,
alerts with the time they were raised), pushed to the page by server-sent events; ``metrics.py``
publishes the same replica as Prometheus metrics; ``images_source.py`` gives the latest scan's
images (and each read file's electrons per frame and thumbnail), drawn as PNG by ``png.py``; ``control.py`` carries out an operator's POSTs when a token is configured. The page
(``static/``) is plain HTML, CSS and JavaScript shipped in the package: no network access needed.

Needs the ``dashboard`` extra (starlette, uvicorn, prometheus-client); nothing else of sectorflow
imports this package, so receiver hosts install without it. What an operator does from the page
(acquire, sessions) is sectorflow.operations's, as on the command line.
"""

"""``dpgate web``: a page where analysts see answers with their error bars and owners see where the budget went.

The same gateway as every other front door (each statement runs through the signed-in analyst's
``Gateway``), behind the protections of ``dpgate serve``, whose modules it reuses:

- ``app``: the Starlette application: the pages, the JSON API, sign-in, CSRF and Origin checks;
- ``sessions``: signed-in browsers (idle and age limits, caps per login and in all);
- ``connections``: uvicorn's HTTP/1.1 protocol holding the server's connection slots and
  timing its clients;
- ``views``: what the pages show, as JSON;
- ``serve``: listening (loopback by default; TLS elsewhere) and running until stopped;
- ``static/``: the page, its scripts and styles, and the charting library (Observable Plot and
  D3, ISC licences beside them), all served from the package: no CDN, works offline.

Starlette and uvicorn come with the ``web`` extra (``pip install 'dpgate[web]'``).
"""

"""The servers ``bench.run`` compares, each serving the same one-tool ``add``.

Django ones pick their settings through ``DJANGO_SETTINGS_MODULE`` and are served by
``bench.servers.wsgi`` (gunicorn) or ``bench.servers.asgi`` (uvicorn); ``BENCH_VIEW``
(``sync`` or ``async``) picks the view that suits the server.
"""

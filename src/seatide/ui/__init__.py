"""The web UI, served by every coordinator: one static page and its assets.

The page is a small vanilla-JavaScript app (no build step, nothing fetched from
elsewhere at run time) that reads and acts only through the REST API under /api/v1, so
it works against any coordinator and survives a failover like any other client.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = os.path.join(os.path.dirname(__file__), "static")


def mount_ui(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        # Revalidated on every load, so a coordinator upgrade shows at once.
        return FileResponse(os.path.join(STATIC, "index.html"), headers={"Cache-Control": "no-cache"})

    app.mount("/ui", StaticFiles(directory=STATIC), name="ui")

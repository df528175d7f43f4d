"""Shared fixtures: one SparkSession for the whole run (it costs ~7 s to start)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    from seatide.runtime.session import build_session

    session = build_session("seatide-tests", {"spark.master": "local[2]"})
    yield session
    session.stop()


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "seatide"
    path.mkdir()
    return str(path)

"""A pytest run inside a test (a plugin's own story): a fresh process with only the plugins it
names. Autoloaded, every installed plugin (hypothesis and schemathesis among them) cost each
inner pytest process about a second of CPU importing what its tests never use."""

from __future__ import annotations

import os
import sys


def inner_pytest(*plugins: str) -> tuple[list[str], dict[str, str]]:
    """The command (xdist's options and ``plugins`` loaded, no cache) and environment (ours, less
    the outer run's PYTEST_ variables) for pytest run in a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    named = [arg for plugin in ("xdist.plugin", *plugins) for arg in ("-p", plugin)]
    return [sys.executable, "-m", "pytest", *named, "-p", "no:cacheprovider"], env

"""Root conftest: make the gradcheck pytest plugin available in a checkout.

When gradcheck is pip-installed the plugin is registered by its ``pytest11`` entry point; in a
plain checkout (no install) we load it here instead, never both.
"""

from importlib.metadata import entry_points


def _plugin_installed() -> bool:
    return any(ep.value == "gradcheck.pytest_plugin" for ep in entry_points(group="pytest11"))


pytest_plugins = [] if _plugin_installed() else ["gradcheck.pytest_plugin"]

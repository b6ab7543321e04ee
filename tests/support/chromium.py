"""A minimal headless-Chromium driver over the DevTools protocol, standard library only.

Chromium is started with ``--remote-debugging-pipe``: it reads protocol messages (JSON, each
ended by a NUL byte) from file descriptor 3 and writes replies and events to descriptor 4, so no
websocket client and no network port are needed.  Used by the report tests and by
``benchmarks/report_load.py``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable (``$CHROMIUM`` first), or None."""
    env = os.environ.get("CHROMIUM")
    if env and shutil.which(env):
        return shutil.which(env)
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


_TRAMPOLINE = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
               "os.execv(sys.argv[3], sys.argv[3:])")


def _move_high(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Browser:
    """One headless browser with one page; ``call`` sends a command and waits for its reply."""

    def __init__(self, executable: str, width: int = 1400, height: int = 1000) -> None:
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="gc-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # the child's ends move to descriptors >= 10, so `3<&R 4>&W` below cannot clobber them
        to_child_r, from_child_w = (_move_high(fd) for fd in (to_child_r, from_child_w))

        args = ["--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-dev-shm-usage",
                f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
                "about:blank"]
        # a tiny Python trampoline moves the pipe ends to descriptors 3 and 4 and execs
        # Chromium (no preexec_fn: no Python code of this process runs between fork and exec,
        # which threaded engines such as jax warn about; dash cannot redirect fds >= 10)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _TRAMPOLINE, str(to_child_r), str(from_child_w), executable,
             *args],
            pass_fds=(to_child_r, from_child_w),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        targets = self.call("Target.getTargets", browser=True)["targetInfos"]
        page = next(t["targetId"] for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", browser=True, targetId=page,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._to_child, json.dumps(message).encode() + b"\0")

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._from_child], [], [], remaining)[0]:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, *, browser: bool = False, timeout: float = 30.0,
             **params: Any) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session and not browser:
            msg["sessionId"] = self.session
        self._send(msg)
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            ev = self._receive(deadline)
            if ev.get("method") == method:
                return ev
            self.events.append(ev)

    def navigate(self, url: str, timeout: float = 30.0) -> None:
        """Load ``url`` and wait for its load event."""
        self.events.clear()
        result = self.call("Page.navigate", url=url)
        if "errorText" in result:
            raise RuntimeError(f"cannot load {url}: {result['errorText']}")
        if result.get("loaderId"):  # absent for a same-document (fragment) navigation
            self.wait_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str) -> Any:
        """Value of a JavaScript expression in the page (DevTools evaluation, not page code)."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression!r} raised: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"timed out waiting for {expression!r}")

    def screenshot(self, path: str | Path, full_page: bool = False) -> Path:
        """PNG of the viewport, or of the whole page when ``full_page``."""
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            self.call("Emulation.setDeviceMetricsOverride", width=self.width,
                      height=int(min(size["height"], 16000)), deviceScaleFactor=1, mobile=False)
        try:
            data = self.call("Page.captureScreenshot", format="png")["data"]
        finally:
            if full_page:
                self.call("Emulation.setDeviceMetricsOverride", width=self.width,
                          height=self.height, deviceScaleFactor=1, mobile=False)
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def console_messages(self) -> list[str]:
        """Console/log entries seen so far (CSP violations are reported here)."""
        out = []
        for ev in self.events:
            if ev.get("method") == "Log.entryAdded":
                out.append(ev["params"]["entry"].get("text", ""))
            elif ev.get("method") == "Runtime.consoleAPICalled":
                out.append(" ".join(str(a.get("value", "")) for a in ev["params"]["args"]))
            elif ev.get("method") == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(ev["params"]["exceptionDetails"])[:500])
        return out

    def close(self) -> None:
        try:
            self.call("Browser.close", browser=True, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The transport of the model protocol (``docs/protocol-model.md``): a :class:`ModelPeer`.

A model peer is the *user's program* linking a gradcheck library (``gradcheck-candle``,
``gorgoniacheck``) that answers ``model.*`` requests about the user's own model.  Two ways to
reach it, one conversation (the harness always asks):

* ``ModelPeer(command)``: the harness starts the program (``sh -c`` for a string, the argv for a
  sequence) with ``GRADCHECK_PROTOCOL=model`` in its environment and speaks on its pipes, with
  the process machinery of :mod:`gradcheck.backends.process` (the child in its own session and
  killed with the harness, request timeouts that cover the write, a crash reported with the
  tail of the child's stderr, malformed lines refused);
* ``ModelPeer.over_stdio()`` (``gradcheck model --peer-stdio``): the program started the
  harness; requests go to this process's stdout and answers come from its stdin.  The caller
  first moves its own printing aside with :func:`claim_stdio`.

Unlike an op child, a model program is never restarted after a failure: a fresh program would
build the model again, maybe at another point ``theta0``; every later request raises the first
failure, and the checks that needed it report an ``error`` result.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar

from gradcheck.backends import children
from gradcheck.backends.process import ProcessBackend, _Child, _lines, exchange_line
from gradcheck.backends.wire import (
    PROTOCOL_VERSION,
    ProtocolError,
    RemoteError,
    parse_response,
)

__all__ = ["ModelPeer", "PeerTraffic", "claim_stdio", "forwards_of", "shell_argv"]

# the process machinery's words for an op child, which is restarted; a model program is not
_NOT_RESTARTED = (("; it will be restarted for the next request", ""),
                  ("it was killed and will be restarted for the next request", "it was killed"))

#: the environment variable that tells the library to answer on its pipes
PROTOCOL_ENV = "GRADCHECK_PROTOCOL"
#: once a forward's time is measured, a request may take this many times its forwards' time
#: (never less than the fixed request timeout)
FORWARD_FACTOR = 20.0
#: a backward counted as this many forwards (``model.grads``, ``model.line``'s projection, each
#: call of the user's step)
BACKWARD_FORWARDS = 3


def forwards_of(method: str, params: Mapping[str, Any]) -> int:
    """How many forwards (a backward counted as :data:`BACKWARD_FORWARDS`) a request costs the
    program: ``model.line`` one per ``t`` and its gradient, ``model.step`` a fresh gradient and
    the user's step per call (``"repeat"``: 2 calls), ``model.grads`` one backward."""
    if method == "model.loss":
        return 1
    if method == "model.grads":
        return BACKWARD_FORWARDS
    if method == "model.line":
        return len(params.get("t") or ()) + BACKWARD_FORWARDS
    if method == "model.step":
        calls = 2 if params.get("experiment") == "repeat" else int(params.get("steps", 1) or 1)
        return 2 * BACKWARD_FORWARDS * max(1, calls)
    return 0


def shell_argv(command: str | Sequence[str]) -> list[str]:
    """The argv of a command: ``sh -c`` for a string, the sequence itself otherwise."""
    if isinstance(command, str):
        return ["sh", "-c", command]
    argv = [str(a) for a in command]
    if not argv:
        raise ValueError("the model command is empty")
    return argv


@dataclass
class PeerTraffic:
    """What crossed the pipe: requests per method, bytes both ways (each line with its
    newline)."""

    requests: dict[str, int]
    bytes_sent: int = 0
    bytes_received: int = 0

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def total_bytes(self) -> int:
        return self.bytes_sent + self.bytes_received


class _StdioChild:
    """This process's own stdin/stdout as the peer's pipes (``--peer-stdio``)."""

    def __init__(self, reader: IO[str], writer: IO[str]) -> None:
        self.writer = writer
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.argv = ["<stdio>"]
        threading.Thread(target=self._pump, args=(reader,), daemon=True).start()

    def _pump(self, reader: IO[str]) -> None:
        try:
            for line in _lines(reader):
                self.lines.put(line)
        finally:
            self.lines.put(None)

    def stderr_text(self) -> str:
        return ""

    def exchange(self, line: str, method: str, timeout: float) -> str:
        who = "the program that started the harness"
        return exchange_line(
            self.writer, self.lines, line, timeout,
            unread=lambda: f"{who} did not read the {method!r} request within {timeout:g} s "
                           "(timeout)",
            closed=lambda exc: (f"{who} closed its end of the pipe while {method!r} was sent "
                                f"({exc})" if exc is not None else
                                f"{who} closed the pipe (EOF on stdin) instead of answering "
                                f"{method!r}"),
            unanswered=lambda: f"{who} did not answer {method!r} within {timeout:g} s (timeout)")

    def close(self) -> None:
        try:
            self.writer.close()
        except OSError:
            pass


def claim_stdio() -> tuple[IO[str], IO[str]]:
    """Take this process's stdin and stdout for the protocol: returns ``(reader, writer)`` on
    the original descriptors and points file descriptor 1 (and ``sys.stdout``) at stderr, so
    nothing printed afterwards, by Python or by native code, can corrupt the stream."""
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    writer = os.fdopen(out_fd, "w", encoding="utf-8", buffering=1)
    reader = os.fdopen(os.dup(0), "r", encoding="utf-8")
    sys.stdout = sys.stderr
    return reader, writer


class ModelPeer(ProcessBackend):
    """The answering side of the model protocol (module doc); :meth:`request` returns a
    request's ``result`` or raises :class:`ProtocolError` / :class:`RemoteError`
    (``RemoteUnsupported`` for ``unsupported``)."""

    name: ClassVar[str] = "model"
    max_restarts = 0

    def __init__(self, command: str | Sequence[str] | None = None, *,
                 env: Mapping[str, str] | None = None, cwd: str | None = None,
                 request_timeout: float = 60.0, startup_timeout: float | None = None,
                 stdio: tuple[IO[str], IO[str]] | None = None) -> None:
        if (command is None) == (stdio is None):
            raise ValueError("a ModelPeer needs a command or the stdio pipes, not both")
        argv = shell_argv(command) if command is not None else ["<stdio>"]
        super().__init__(argv, cwd=cwd, env={**(env or {}), PROTOCOL_ENV: "model"},
                         request_timeout=request_timeout)
        # building a Rust example can take minutes before the library answers hello
        self.startup_timeout = (max(300.0, float(request_timeout)) if startup_timeout is None
                                else float(startup_timeout))
        self._stdio = stdio
        self.display = command if isinstance(command, str) else (
            " ".join(argv) if command is not None else "<the program that started gradcheck>")
        self.traffic = PeerTraffic({})
        self.exit_code: int | None = None
        #: the measured time of one forward (``model.loss``), set by the audit; None: every
        #: request gets the fixed ``request_timeout``
        self.forward_s: float | None = None

    @classmethod
    def over_stdio(cls, reader: IO[str], writer: IO[str], *,
                   request_timeout: float = 60.0) -> ModelPeer:
        """A peer that is the program which started this process (:func:`claim_stdio`)."""
        return cls(stdio=(reader, writer), request_timeout=request_timeout)

    # -- the conversation ------------------------------------------------------------------
    def timeout_for(self, method: str, params: Mapping[str, Any]) -> float:
        """The request's timeout: ``max(request_timeout, FORWARD_FACTOR x forward_s x
        forwards_of(request))`` once :attr:`forward_s` is measured, else ``request_timeout``."""
        base = float(self.request_timeout)
        if not self.forward_s or self.forward_s <= 0:
            return base
        return max(base, FORWARD_FACTOR * self.forward_s * forwards_of(method, params))

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request (starting the program if needed) and return its ``result``, with
        the timeout :meth:`timeout_for` gives it."""
        with self._lock:
            child = self._child if self._child is not None else self._start()
            return self._request_on(child, method, params, self.timeout_for(method, params))

    def _start(self) -> Any:
        if self._fatal is not None:
            raise ProtocolError(self._fatal)
        if self._failures_in_row:
            raise ProtocolError(f"the model program failed earlier and is not started again "
                                f"(a fresh one would build the model anew): {self._last_failure}")
        child: Any
        if self._stdio is not None:
            child = _StdioChild(*self._stdio)
        else:
            env = {**os.environ, **(self._env or {})}
            try:
                child = _Child(self.command(), self._cwd, env)
            except OSError as exc:
                self._fatal = f"cannot start the model program {self.display!r}: {exc}"
                raise ProtocolError(self._fatal) from exc
        self._child = child
        try:
            hello = self._request_on(child, "hello", {"protocol": PROTOCOL_VERSION,
                                                      "client": "gradcheck"},
                                     self.startup_timeout)
        except RemoteError as exc:
            self._fatal = (f"the model program refused the handshake: gradcheck speaks protocol "
                           f"{PROTOCOL_VERSION} ({exc.remote_message})")
            self._drop(child)
            raise ProtocolError(self._fatal) from exc
        problem = self._check_hello(hello)
        if problem:
            self._fatal = f"the model program {self.display!r}: {problem}"
            self._drop(child)
            raise ProtocolError(self._fatal)
        self._hello = hello
        return child

    def _check_hello(self, hello: dict[str, Any]) -> str | None:
        if hello.get("protocol") != PROTOCOL_VERSION:
            return (f"version mismatch: gradcheck speaks protocol {PROTOCOL_VERSION}, the "
                    f"program answered protocol {hello.get('protocol')!r}")
        if hello.get("kind") != "model":
            return (f"it answers hello with kind {hello.get('kind')!r}, not 'model': it is not "
                    "a program linking a gradcheck model library (or the library did not see "
                    f"{PROTOCOL_ENV}=model)")
        return None

    def _request_on(self, child: Any, method: str, params: dict[str, Any],
                    timeout: float) -> dict[str, Any]:
        line = self._line(method, params)
        self.traffic.requests[method] = self.traffic.requests.get(method, 0) + 1
        self.traffic.bytes_sent += len(line.encode("utf-8")) + 1
        try:
            answer = child.exchange(line, method, timeout)
            self.traffic.bytes_received += len(answer.encode("utf-8")) + 1
            result = parse_response(answer, self._next_id, method)
        except ProtocolError as exc:
            self._failures_in_row += 1
            text = str(exc)
            for said, meant in _NOT_RESTARTED:
                text = text.replace(said, meant)
            self._last_failure = text
            self._drop(child)
            if text != str(exc):
                raise type(exc)(text) from exc
            raise
        return result

    def _drop(self, child: Any) -> None:
        if isinstance(child, _Child):
            child.close()
            self.exit_code = child.proc.returncode
        else:
            child.close()
        if self._child is child:
            self._child = None

    def close(self) -> None:
        """End the conversation: close the program's stdin (the library then exits 0), give it
        a few seconds, then end its whole process group."""
        with self._lock:
            child, self._child = self._child, None
            if child is None:
                return
            if isinstance(child, _Child):
                try:
                    if child.proc.stdin is not None:
                        child.proc.stdin.close()
                except OSError:
                    pass
                try:
                    self.exit_code = child.proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    pass
                children.end_group(child.proc, wait_s=1.0)
            else:
                child.close()

    # -- the Backend identity (the results' backend field) ---------------------------------
    def version(self) -> str:
        return str(self.hello().get("engine_version", "unknown"))

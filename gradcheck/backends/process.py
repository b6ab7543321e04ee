"""Adapters for engines in other languages: a child process speaking the JSON-lines protocol.

The protocol is specified in ``docs/protocol.md`` (wire format in :mod:`.wire`, op meanings in
:mod:`.protocol_ops`).  A :class:`ProcessBackend` starts the child lazily, shakes hands
(``hello``: protocol version, engine version, devices, dtypes, capabilities, semantics), then
sends one request per evaluation, VJP or JVP and waits for the answer with a timeout.

Failure handling, so that one misbehaving child fails only the affected checks:

* a **timeout** kills the child; the request raises :class:`ProtocolTimeout` (a
  :class:`ProtocolError` and a ``TimeoutError``); the next request starts a fresh child;
* a **crash** (the child exits or closes its stdout) raises with the exit code and the tail of
  its stderr; the next request restarts it, at most ``max_restarts`` times in a row (a
  handshake does not count as a success): after that every request raises at once, without
  starting a child, naming the last failure;
* the timeout covers **writing** the request as well: a child that stops reading its stdin
  cannot block the harness on a request larger than the pipe's buffer;
* a **malformed line** (not JSON, wrong id, bad array) raises and restarts the child, since its
  stream can no longer be trusted;
* a **version mismatch** or a declaration that disagrees with the adapter's is permanent: every
  later request raises the same message without restarting.

``fn`` for a process backend is a :class:`RemoteOp` (an op name, optionally transformed for
order 2), obtained with :meth:`ProcessBackend.op`.
"""

from __future__ import annotations

import atexit
import collections
import io
import os
import queue
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar

import numpy as np

from gradcheck.backends import children
from gradcheck.backends.base import Backend
from gradcheck.backends.process_model import ModelSpec
from gradcheck.backends.process_training import ProcessTraining
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.backends.wire import (
    PROTOCOL_VERSION,
    ProtocolError,
    ProtocolTimeout,
    RemoteError,
    decode_array,
    dumps_request,
    encode_array,
    parse_response,
)

__all__ = ["ProcessBackend", "ProtocolError", "RemoteError", "RemoteOp"]


@dataclass(frozen=True)
class RemoteOp:
    """A function that runs in the child: protocol op ``name``, with ``transforms`` applied.

    A transform ``("vjp", diff, n_args)`` turns ``f`` into ``g(*args, *cotangents) = J^T v``
    (for order 2); ``("jvp", diff, n_args)`` into ``g(*args, *tangents) = J u``.
    """

    name: str
    transforms: tuple[tuple[str, tuple[int, ...], int], ...] = ()

    @property
    def __name__(self) -> str:
        return "".join(f"{k}(" for k, _, _ in reversed(self.transforms)) + self.name + ")" * len(
            self.transforms)

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.name, "transforms": [
            {"kind": k, "diff": list(d), "n_args": n} for k, d, n in self.transforms]}

    def __call__(self, *args: Any) -> Any:
        raise TypeError(f"{self.__name__} runs inside the engine's child process; pass it to "
                        "gradcheck with its process backend instead of calling it")


_LIVE: weakref.WeakSet[_Child] = weakref.WeakSet()


@atexit.register
def _kill_children() -> None:  # pragma: no cover - runs at interpreter exit
    for child in list(_LIVE):
        children.end_group(child.proc, wait_s=0.5)


def _lines(stream: IO[str] | None) -> Iterator[str]:
    """The lines of one of a child's pipes, without their newline, until EOF: any bytes are
    read (what is not UTF-8 is decoded as U+FFFD), and a pipe that fails to read ends the
    lines instead of the reader thread with an exception."""
    if stream is None:
        return
    try:
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")
        for line in stream:
            yield line.rstrip("\n")
    except (OSError, ValueError):  # closed under the reader (close() of a killed child)
        return


def exchange_line(stream: IO[str], lines: queue.Queue[str | None], line: str, timeout: float,
                  *, unread: Callable[[], str], closed: Callable[[BaseException | None], str],
                  unanswered: Callable[[], str]) -> str:
    """Write ``line`` to ``stream`` and return the next line ``lines`` receives (``None`` there
    is end of file), both within ``timeout``.  The write runs on a thread, so a peer that stops
    reading cannot block the harness on a line larger than the pipe's buffer.  Failures raise
    :class:`ProtocolTimeout` (``unread()``: not read in time; ``unanswered()``: no answer in
    time) or :class:`ProtocolError` (``closed(exc)``: the write failed with ``exc``, or the
    peer closed its end with ``exc`` None); the messages are built only on failure."""
    deadline = time.monotonic() + timeout
    written = threading.Event()
    failed: list[BaseException] = []

    def write() -> None:
        try:
            stream.write(line + "\n")
            stream.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            failed.append(exc)
        finally:
            written.set()

    threading.Thread(target=write, daemon=True).start()
    if not written.wait(timeout):
        raise ProtocolTimeout(unread())
    if failed:
        raise ProtocolError(closed(failed[0]))
    try:
        answer = lines.get(timeout=max(deadline - time.monotonic(), 0.0))
    except queue.Empty:
        raise ProtocolTimeout(unanswered()) from None
    if answer is None:
        raise ProtocolError(closed(None))
    return answer


class _Child:
    """One running child process and the threads draining its stdout and stderr."""

    def __init__(self, argv: Sequence[str], cwd: str | None, env: dict[str, str] | None) -> None:
        self.argv = list(argv)
        self.proc = children.popen(  # its own session, killed when this process dies
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", bufsize=1, cwd=cwd, env=env)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        threading.Thread(target=self._pump_out, daemon=True).start()
        self._err = threading.Thread(target=self._pump_err, daemon=True)
        self._err.start()
        _LIVE.add(self)

    def _pump_out(self) -> None:
        try:
            for line in _lines(self.proc.stdout):
                self.lines.put(line)
        finally:
            self.lines.put(None)  # EOF (or a pipe that cannot be read any more)

    def _pump_err(self) -> None:
        for line in _lines(self.proc.stderr):
            self.stderr_tail.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self) -> str:
        tail = [s for s in self.stderr_tail if s.strip()][-5:]
        return ("; child stderr: " + " | ".join(tail)) if tail else ""

    def exchange(self, line: str, method: str, timeout: float) -> str:
        """Send one line, return the next line of stdout; raise ProtocolError on crash/timeout
        (:func:`exchange_line`)."""
        assert self.proc.stdin is not None
        return exchange_line(
            self.proc.stdin, self.lines, line, timeout,
            unread=lambda: (f"the child did not read the {method!r} request within "
                            f"{timeout:g} s (timeout: it stopped reading its stdin); it was "
                            "killed and will be restarted for the next request"
                            f"{self.stderr_text()}"),
            closed=lambda _exc: self._crash_message(method),
            unanswered=lambda: (f"the child did not answer {method!r} within {timeout:g} s "
                                "(timeout); it was killed and will be restarted for the next "
                                f"request{self.stderr_text()}"))

    def _crash_message(self, method: str) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        # the stdout reader can see EOF before the stderr reader has read the child's last
        # words (seen on a loaded machine): let it drain what the exited child left
        if code is not None:
            self._err.join(timeout=2)
        return (f"the child crashed while answering {method!r} (exit code {code}); it will be "
                f"restarted for the next request{self.stderr_text()}")

    def close(self) -> None:
        children.end_group(self.proc)  # the child's whole group: a wrapper's children too
        try:  # stdout/stderr are closed by their reader threads at EOF
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        _LIVE.discard(self)


class ProcessBackend(Backend):
    """Base adapter of an engine running in a child process (see module doc and protocol.md).

    Subclasses set :attr:`name`, :attr:`semantics`, :attr:`dtypes`, :attr:`supports_jvp`,
    :attr:`supports_order2` (what the adapter *declares*; the ``hello`` answer must agree) and
    implement :meth:`command`.  Or instantiate it directly with ``command=[...]``.
    """

    name: ClassVar[str] = "process"
    declared_devices: ClassVar[tuple[str, ...]] = ("cpu",)
    # the named model the child builds for the model audit (Candle's VarMap model, Gorgonia's
    # model: gradcheck.model_audit.model_flow), or None where it builds none
    model_spec: ClassVar[ModelSpec | None] = None
    request_timeout: float = 60.0
    startup_timeout: float = 30.0
    max_restarts: int = 3

    def __init__(self, command: Sequence[str] | None = None, *, cwd: str | None = None,
                 env: dict[str, str] | None = None, request_timeout: float | None = None) -> None:
        self._command = list(command) if command is not None else None
        self._cwd = cwd
        self._env = env
        if request_timeout is not None:
            self.request_timeout = request_timeout
        self._child: _Child | None = None
        self._hello: dict[str, Any] | None = None
        self._ops: list[str] | None = None
        self._fatal: str | None = None
        self._failures_in_row = 0
        self._last_failure = ""
        self._next_id = 0
        self._lock = threading.RLock()

    # -- child management -------------------------------------------------------------------
    def command(self) -> list[str]:
        """The argv that starts the child: the one given, else :meth:`child_argv` once
        :meth:`unavailable` has no objection (an engine that is not built or installed here is
        a ``NotImplementedError`` naming the reason, which the checks report as a skip)."""
        if self._command is not None:
            return self._command
        reason = self.unavailable()
        if reason:
            raise NotImplementedError(f"backend {self.name!r} is not available: {reason}")
        return self.child_argv()

    def unavailable(self) -> str | None:
        """Why the child cannot start here (None: it can); adapters of built engines override."""
        return None

    def child_argv(self) -> list[str]:
        """The child's argv when none was given to the constructor; adapters override."""
        raise NotImplementedError(f"{type(self).__name__} must define child_argv() or be given "
                                  "a command")

    @property
    def child_pid(self) -> int | None:
        """Process id of the running child (None when none is running)."""
        return self._child.pid if self._child is not None else None

    def close(self) -> None:
        """Stop the child (politely with ``shutdown`` when it is healthy)."""
        with self._lock:
            if self._child is not None:
                child, self._child = self._child, None
                if child.proc.poll() is None:
                    try:
                        child.exchange(self._line("shutdown", {}), "shutdown", 2.0)
                    except ProtocolError:
                        pass
                child.close()

    def _line(self, method: str, params: dict[str, Any]) -> str:
        self._next_id += 1
        return dumps_request(self._next_id, method, params)

    def _start(self) -> _Child:
        if self._fatal is not None:
            raise ProtocolError(self._fatal)
        if self._failures_in_row > self.max_restarts:
            raise ProtocolError(f"backend {self.name!r}: the child failed {self._failures_in_row}"
                                f" times in a row (max_restarts={self.max_restarts}); not "
                                f"restarting it again; the last failure: {self._last_failure}")
        env = None if self._env is None else {**os.environ, **self._env}
        try:
            child = _Child(self.command(), self._cwd, env)
        except OSError as exc:
            raise ProtocolError(f"backend {self.name!r}: cannot start {self.command()!r}: "
                                f"{exc}") from exc
        self._child = child
        try:
            hello = self._request_on(child, "hello", {"protocol": PROTOCOL_VERSION,
                                                      "client": "gradcheck"},
                                     self.startup_timeout)
        except RemoteError as exc:
            child.close()
            self._child = None
            self._fatal = (f"backend {self.name!r}: version mismatch: gradcheck speaks protocol "
                           f"{PROTOCOL_VERSION} and the child refused it ({exc.remote_message})")
            raise ProtocolError(self._fatal) from exc
        problem = self._check_hello(hello)
        if problem:
            self._fatal = f"backend {self.name!r}: {problem}"
            child.close()
            self._child = None
            raise ProtocolError(self._fatal)
        self._hello = hello
        return child

    def _check_hello(self, hello: dict[str, Any]) -> str | None:
        if hello.get("protocol") != PROTOCOL_VERSION:
            return (f"version mismatch: gradcheck speaks protocol {PROTOCOL_VERSION}, the child "
                    f"answered protocol {hello.get('protocol')!r}")
        caps = hello.get("capabilities", {})
        declared = {"dtypes": list(self.dtypes), "devices": list(self.declared_devices)}
        for key, want in declared.items():
            if list(hello.get(key, [])) != want:
                return (f"the child declares {key}={hello.get(key)!r} but the adapter declares "
                        f"{want!r}")
        for cap, wanted in (("jvp", self.supports_jvp), ("order2", self.supports_order2)):
            if bool(caps.get(cap)) != wanted:
                return (f"the child declares capability {cap}={caps.get(cap)!r} but the adapter "
                        f"declares {wanted!r}")
        sem = hello.get("semantics", {})
        if sem.get("accumulation") != self.semantics.accumulation.value:
            return (f"the child declares accumulation {sem.get('accumulation')!r} but the adapter "
                    f"declares {self.semantics.accumulation.value!r}")
        return None

    def _request_on(self, child: _Child, method: str, params: dict[str, Any],
                    timeout: float) -> dict[str, Any]:
        line = self._line(method, params)
        try:
            answer = child.exchange(line, method, timeout)
            result = parse_response(answer, self._next_id, method)
        except ProtocolError as exc:
            self._failures_in_row += 1
            self._last_failure = str(exc)
            child.close()
            if self._child is child:
                self._child = None
            raise
        if method != "hello":  # a child that shakes hands and dies on every request is capped
            self._failures_in_row = 0
        return result

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request (starting the child if needed) and return its ``result``.

        Raises :class:`ProtocolError` (timeout, crash, malformed answer, version mismatch) or
        :class:`RemoteError` / ``RemoteUnsupported`` (the child answered with an error).
        """
        with self._lock:
            child = self._child if self._child is not None else self._start()
            return self._request_on(child, method, params, self.request_timeout)

    def hello(self) -> dict[str, Any]:
        """The child's ``hello`` answer (starts it if needed)."""
        with self._lock:
            if self._child is None:
                self._start()
            assert self._hello is not None
            return self._hello

    # -- identity ---------------------------------------------------------------------------
    def version(self) -> str:
        return str(self.hello().get("engine_version", "unknown"))

    def devices(self) -> list[str]:
        return list(self.declared_devices)

    def ops(self) -> list[str]:
        """Names of the ops the child implements."""
        if self._ops is None:
            self._ops = [str(o["name"]) for o in self.request("ops", {}).get("ops", [])]
        return self._ops

    def op(self, name: str) -> Callable | None:
        try:
            available = name in self.ops()
        except (ProtocolError, RemoteError):  # the checks themselves will report the failure
            available = name in PROTOCOL_OPS
        return RemoteOp(name) if available else None

    def oracle_forward(self, fn: Callable) -> Callable | None:
        if isinstance(fn, RemoteOp) and not fn.transforms and fn.name in PROTOCOL_OPS:
            return PROTOCOL_OPS[fn.name].forward
        return None

    # -- calculus ---------------------------------------------------------------------------
    def _compute_dtype(self, args: Sequence[np.ndarray]) -> str:
        floats = [np.asarray(a).dtype.name for a in args
                  if np.issubdtype(np.asarray(a).dtype, np.floating)]
        for name in floats:
            if name in self.dtypes:
                return name
        return max(self.dtypes, key=lambda d: np.finfo(np.dtype(d)).bits)

    def _call(self, method: str, fn: Callable, args: Sequence[np.ndarray], device: str,
              extra: dict[str, Any], out_key: str, like: Sequence[Any] | None) -> list[np.ndarray]:
        if not isinstance(fn, RemoteOp):
            raise TypeError(f"backend {self.name!r} runs ops by name: pass backend.op(name) (a "
                            f"RemoteOp), not {type(fn).__name__}")
        dtype = self._compute_dtype(args)
        params = {"fn": fn.to_wire(), "device": device, "dtype": dtype,
                  "args": [encode_array(a) for a in args], **extra}
        result = self.request(method, params)
        raw = result.get(out_key)
        if not isinstance(raw, list):
            raise ProtocolError(f"malformed answer to {method!r}: {out_key!r} must be a list")
        out = [decode_array(a, f"{method} {out_key}[{k}]") for k, a in enumerate(raw)]
        floats = [np.asarray(a).dtype for a in args if np.issubdtype(np.asarray(a).dtype,
                                                                     np.floating)]
        target = floats[0] if floats else np.dtype(np.float64)
        return [o.astype(target) for o in out]

    def evaluate(self, fn, args, device):
        return self._call("evaluate", fn, args, device, {}, "outputs", None)

    def vjp(self, fn, args, diff, cotangents, device):
        extra = {"diff": list(diff), "cotangents": [encode_array(c) for c in cotangents]}
        return self._call("vjp", fn, args, device, extra, "grads", None)

    def jvp(self, fn, args, diff, tangents, device):
        if not self.supports_jvp:
            raise NotImplementedError(f"backend {self.name!r} has no forward mode")
        extra = {"diff": list(diff), "tangents": [encode_array(t) for t in tangents]}
        return self._call("jvp", fn, args, device, extra, "tangents", None)

    def _transformed(self, fn: Callable, kind: str, diff: Sequence[int], n_args: int) -> RemoteOp:
        if not self.supports_order2:
            raise NotImplementedError(f"backend {self.name!r} has no order-2 support")
        if not isinstance(fn, RemoteOp):
            raise TypeError(f"backend {self.name!r} needs a RemoteOp, got {type(fn).__name__}")
        return RemoteOp(fn.name, fn.transforms + ((kind, tuple(diff), n_args),))

    def vjp_function(self, fn, diff, n_args):
        return self._transformed(fn, "vjp", diff, n_args)

    def jvp_function(self, fn, diff, n_args):
        if not self.supports_jvp:
            raise NotImplementedError(f"backend {self.name!r} has no forward mode")
        return self._transformed(fn, "jvp", diff, n_args)

    def training(self, device: str, dtype: str) -> Any:
        caps = self.hello().get("capabilities", {})
        if not caps.get("training"):
            raise NotImplementedError(f"backend {self.name!r}: the child declares no training "
                                      "capability")
        return ProcessTraining(self, device, dtype)

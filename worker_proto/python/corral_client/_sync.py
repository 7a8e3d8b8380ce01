"""The synchronous client: one blocking Unix-socket connection to a corral supervisor.

Thread-safe by a lock: one request is driven at a time (a streaming iterator holds the
connection until it is exhausted or closed). Interrupting a call (KeyboardInterrupt, an exception
in a callback, closing a stream early) cancels the request on the supervisor, so nothing started
by a dropped call keeps running.
"""

from __future__ import annotations

import inspect
import socket as socketlib
import threading
import time
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union)

from . import _wire as w
from . import errors
from .results import (Caps, Chunk, DirEntry, EvalResult, ExecResult, FileWindow, Layer, PollResult)

Authorizer = Callable[[Dict[str, Any]], Union[bool, Tuple[bool, str]]]
HostHandler = Callable[[bytes], Union[bytes, str]]


class Client:
    """A connection to the supervisor. Use connect() (or Client(socket)); close() or `with`."""

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = 10.0) -> None:
        """Connects to `socket` (None: default_socket_path()) and says hello; `timeout` bounds
        the connect and hello only. Raises SupervisorGone when nobody answers."""
        self.socket_path = socket or w.default_socket_path()
        self._lock = threading.RLock()
        self._next_id = 1
        self._active: Dict[int, w.Op] = {}  # requests being driven, by id
        self._sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(self.socket_path)
            self._sock.sendall(w.hello())
            reply = self._recv()
            if reply.kind == w.B.Error:
                w.raise_error(reply)
            if reply.kind != w.B.HelloReply:
                raise errors.ProtocolError("expected HelloReply, got %s" % reply.kind_name)
            self.server_version: str = w.text(reply.body.ServerVersion())
            self.layers: List[Layer] = w.layers(reply.body)
            self.max_frame: int = min(reply.body.MaxFrameBytes() or w.MAX_FRAME, w.MAX_FRAME)
            self._sock.settimeout(None)
        except OSError as e:
            self._sock.close()
            raise errors.SupervisorGone("cannot reach the corral supervisor at %s: %s"
                                        % (self.socket_path, e)) from None
        except BaseException:
            self._sock.close()
            raise

    # --- connection -------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection; the supervisor ends whatever runs in its implicit scope."""
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(min(n - len(buf), 1 << 20))
            except OSError as e:
                raise errors.SupervisorGone("the connection to the supervisor failed: %s" % e) from None
            if not chunk:
                raise errors.SupervisorGone("the supervisor closed the connection")
            buf += chunk
        return bytes(buf)

    def _recv(self) -> w.Msg:
        (n,) = w.HEADER.unpack(self._recv_exact(w.HEADER.size))
        if n > getattr(self, "max_frame", w.MAX_FRAME):  # before reading (or allocating) it
            raise errors.ProtocolError("a frame of %d bytes is over the %d-byte limit" % (n, w.MAX_FRAME))
        return w.decode(self._recv_exact(n))

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise errors.SupervisorGone("the connection to the supervisor failed: %s" % e) from None

    def _drive(self, op: w.Op, request: bytes) -> Any:
        """Sends `request` and feeds op every message for its id until the final reply. If this
        is interrupted, the request is cancelled (force) and drained, then the exception goes on."""
        with self._lock:
            self._active[op.request_id] = op
            try:
                self._send(request)
                try:
                    self._pump(op)
                except errors.SupervisorGone:
                    raise
                except BaseException:
                    self._abandon(op)
                    raise
            finally:
                self._active.pop(op.request_id, None)
            return op.value()

    def _pump(self, op: w.Op, once: bool = False) -> None:
        """Reads until op is done (or, with once, until one of its chunks arrived). Messages for
        another request in progress (one a callback started, or the stream it runs inside) go
        to that request, so nesting calls inside callbacks loses nothing."""
        while not op.done:
            msg = self._recv()
            if msg.request_id == 0 and msg.kind == w.B.Error:
                w.raise_error(msg)  # the connection itself was refused
            target = self._active.get(msg.request_id)
            if target is None or target.done:
                continue  # a late frame of an abandoned request
            action = target.feed(msg)
            if isinstance(action, w.Callback):
                try:
                    value = action.fn(*action.args)
                    action = action.answer(value)
                except Exception as e:
                    action = action.fail(e)
            if action:
                self._send(action)
            if once and target is op and msg.kind == w.B.OutputChunk:
                return

    def _abandon(self, op: w.Op) -> None:
        """Cancels op's request and reads up to its final reply, answering nothing for it."""
        try:
            self._send(w.cancel(op.request_id, True))
            while not op.done:
                msg = self._recv()
                if msg.request_id == op.request_id:
                    answer = op.feed_abandoned(msg)
                    if answer:
                        self._send(answer)
        except Exception:
            self.close()  # the connection is in an unknown state: closing ends the request

    def _simple(self, request: bytes, request_id: int, expect: int) -> Any:
        return self._drive(w.Op(request_id, expect), request)

    # --- status -----------------------------------------------------------------------------

    def status(self) -> Dict[str, Any]:
        """The supervisor's status: version, pid, uptime, connections, layers, and the default
        bounds a request without caps gets (each with whether this host enforces it)."""
        rid = self._id()
        return w.status_dict(self._simple(w.status_request(rid), rid, w.B.StatusReply))

    # --- commands ---------------------------------------------------------------------------

    def exec(self, command: w.Argv, *, timeout: Optional[float] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             stdin: Optional[bytes] = None, mode: Optional[w.Mode] = None,
             network: Optional[w.Network] = None, workspaces: Sequence[str] = (),
             deny_read: Sequence[str] = (), protect: Sequence[str] = (),
             binds: Sequence[Tuple[str, str, bool]] = (),
             caps: Optional[Union[Caps, Mapping[str, float]]] = None,
             max_output: Optional[int] = None, scope: Optional[Union[str, "Scope"]] = None,
             on_output: Optional[Callable[[Chunk], None]] = None,
             authorizer: Optional[Authorizer] = None) -> ExecResult:
        """Runs one command to its end and returns its ExecResult.

        command: argv (a list of str) or a shell string (run by /bin/sh -c). timeout, seconds
        (None: the supervisor's 120 s). env: the only variables the command sees, beside PATH,
        HOME and TMPDIR defaults. stdin: bytes (None: /dev/null). mode: "read-only",
        "workspace-write" or "danger-full-access"; network: "denied" or "allowed"; None leaves
        both unset on the wire (the scope's, or the supervisor's default). on_output(Chunk) sees
        output as it comes. authorizer: makes this an authorized launch; it gets the description
        of exactly what will run (a dict) and returns True, False or (False, reason); the
        result's `launched` says whether anything ran. Raises a CorralError subclass when the
        request is refused (RefusedByPolicy, Unsupported, InvalidRequest, ...)."""
        rid = self._id()
        args = self._exec_args(command, locals())
        args.authorize = authorizer is not None
        return self._drive(w.ExecOp(rid, on_output, authorizer), w.exec_request(rid, args))

    def stream(self, command: w.Argv, **kwargs: Any) -> "ExecStream":
        """Like exec(), as an iterator of Chunk; the ExecResult is `.result` once exhausted.
        Closing the iterator early (or leaving a `with` block) cancels the command."""
        rid = self._id()
        args = self._exec_args(command, kwargs)
        return ExecStream(self, rid, w.exec_request(rid, args))

    def spawn(self, command: w.Argv, **kwargs: Any) -> "Background":
        """Starts a background command (no deadline; owned by its scope, by default this uid's
        default detached scope) and returns its handle."""
        rid = self._id()
        args = self._exec_args(command, kwargs)
        args.background = True
        body = self._simple(w.exec_request(rid, args), rid, w.B.BackgroundStarted)
        return Background(self, w.text(body.Id()), w.text(body.Scope()))

    @staticmethod
    def _exec_args(command: w.Argv, kw: Mapping[str, Any]) -> w.ExecArgs:
        scope = kw.get("scope")
        return w.ExecArgs(
            command=command, timeout=kw.get("timeout"), env=kw.get("env"), cwd=kw.get("cwd"),
            stdin=kw.get("stdin"), mode=kw.get("mode"), network=kw.get("network"),
            workspaces=kw.get("workspaces") or (), deny_read=kw.get("deny_read") or (),
            protect=kw.get("protect") or (), binds=kw.get("binds") or (), caps=kw.get("caps"),
            max_output=kw.get("max_output"), scope=scope.id if isinstance(scope, Scope) else scope)

    # --- scopes -----------------------------------------------------------------------------

    def scope(self, id: Optional[str] = None, *, parent: Optional[str] = None, detach: bool = False,
              mode: Optional[w.Mode] = None, network: Optional[w.Network] = None,
              workspaces: Sequence[str] = (), deny_read: Sequence[str] = (),
              protect: Sequence[str] = (), caps: Optional[Caps] = None) -> "Scope":
        """Creates a scope (its policy -- mode, network, workspaces, deny_read, protect, caps -- a
        ceiling for everything that runs in it, file tools included), or with `id` reattaches to
        an existing one. Use it as a context manager: leaving the block closes a scope this call
        created (a reattached one is closed only by close())."""
        if id is not None:
            return Scope(self, id, "", created=False)
        rid = self._id()
        body = self._simple(w.scope_create(rid, parent, detach, mode, network, workspaces, deny_read,
                                          protect, caps), rid,
                            w.B.ScopeCreated)
        return Scope(self, w.text(body.Id()), w.text(body.TempDir()), created=True)

    def close_scope(self, scope_id: str) -> None:
        """Closes a scope: everything in it ends, its temp dir is removed."""
        rid = self._id()
        self._simple(w.scope_close(rid, scope_id), rid, w.B.Ack)

    # --- files ------------------------------------------------------------------------------

    def read(self, path: str, *, offset: int = 0, limit: Optional[int] = None,
             workspaces: Sequence[str] = (), mode: Optional[w.Mode] = None,
             scope: Optional[Union[str, "Scope"]] = None) -> FileWindow:
        """A window of a UTF-8 text file: `limit` bytes (None: 1 MiB) from `offset`. Paths are
        relative to the first workspace root, or absolute beneath a root or the scope's temp dir
        (also seen as /tmp)."""
        rid = self._id()
        body = self._simple(w.read_request(rid, path, False, offset, limit, workspaces, mode, _sid(scope)),
                            rid, w.B.ReadResult)
        return w.file_window(body)

    def read_bytes(self, path: str, max_bytes: Optional[int] = None, *, offset: int = 0,
                   workspaces: Sequence[str] = (), mode: Optional[w.Mode] = None,
                   scope: Optional[Union[str, "Scope"]] = None) -> bytes:
        """Up to `max_bytes` (None: 50 MiB, bounded by the frame limit) of a file, exactly."""
        rid = self._id()
        body = self._simple(w.read_request(rid, path, True, offset, max_bytes, workspaces, mode, _sid(scope)),
                            rid, w.B.ReadResult)
        return w.file_window(body).data

    def write(self, path: str, data: Union[str, bytes], *, workspaces: Sequence[str] = (),
              mode: Optional[w.Mode] = None, scope: Optional[Union[str, "Scope"]] = None) -> int:
        """Writes a file atomically (temp file + rename): str as UTF-8 text, bytes exactly.
        Returns the number of bytes written."""
        rid = self._id()
        body = self._simple(w.write_request(rid, path, data, workspaces, mode, _sid(scope)), rid,
                            w.B.WriteResult)
        return int(body.Bytes())

    def ls(self, path: str = ".", *, max_entries: Optional[int] = None,
           workspaces: Sequence[str] = (), mode: Optional[w.Mode] = None,
           scope: Optional[Union[str, "Scope"]] = None) -> List[DirEntry]:
        rid = self._id()
        body = self._simple(w.list_request(rid, path, max_entries, workspaces, mode, _sid(scope)), rid,
                            w.B.ListResult)
        return w.dir_entries(body)

    # --- workers ----------------------------------------------------------------------------

    def worker(self, name: str, *, python: bool = False, argv: Optional[Sequence[str]] = None,
               scope: Optional[Union[str, "Scope"]] = None, env: Optional[Mapping[str, str]] = None,
               mode: Optional[w.Mode] = None, network: Optional[w.Network] = None,
               workspaces: Sequence[str] = (), caps: Optional[Caps] = None,
               idle_timeout: Optional[float] = None) -> "Worker":
        """Starts a persistent worker: the shipped Python evaluation worker (python=True) or
        `argv` (an absolute path of a trusted executable first). Its scope defaults to this
        uid's default detached scope. Use the handle as a context manager to stop it at the end."""
        if not python and not argv:
            raise ValueError("worker() needs python=True or argv")
        rid = self._id()
        body = self._simple(w.worker_start(rid, name, _sid(scope), argv, python, env, mode, network,
                                           workspaces, caps, idle_timeout), rid, w.B.WorkerStarted)
        return Worker(self, w.text(body.Name()), w.text(body.Scope()), python)

    def _worker_eval(self, name: str, scope: str, request: bytes, timeout: Optional[float],
                     reset: bool, host: Optional[HostHandler]) -> bytes:
        rid = self._id()
        frame = w.worker_eval(rid, name, scope, request, timeout, reset, host is not None)
        return self._drive(w.EvalOp(rid, host), frame)

    def _worker_stop(self, name: str, scope: str, force: bool) -> None:
        rid = self._id()
        self._simple(w.worker_stop(rid, name, scope, force), rid, w.B.Ack)

    def _poll(self, background_id: str) -> PollResult:
        rid = self._id()
        return w.poll_result(self._simple(w.poll(rid, background_id), rid, w.B.PollReply))

    def _stop(self, background_id: str, force: bool) -> None:
        rid = self._id()
        self._simple(w.background_stop(rid, background_id, force), rid, w.B.Ack)


def connect(socket: Optional[str] = None) -> Client:
    """Connects to the supervisor at `socket`; None: $CORRAL_SOCKET, else the default path."""
    return Client(socket)


def _sid(scope: Optional[Union[str, "Scope"]]) -> Optional[str]:
    return scope.id if isinstance(scope, Scope) else scope


class ExecStream:
    """Output of a running command as Chunks; `.result` (ExecResult) once exhausted."""

    def __init__(self, client: Client, request_id: int, request: bytes) -> None:
        self._client, self._request = client, request
        self._pending: List[Chunk] = []
        self._op = w.ExecOp(request_id, self._pending.append)
        self._started = False
        self.result: Optional[ExecResult] = None

    def __iter__(self) -> Iterator[Chunk]:
        return self

    def __next__(self) -> Chunk:
        c = self._client
        if not self._started:
            c._lock.acquire()
            self._started = True
            c._active[self._op.request_id] = self._op
            try:
                c._send(self._request)
            except BaseException:
                c._lock.release()
                raise
        while not self._pending and not self._op.done:
            try:
                c._pump(self._op, once=True)
            except errors.SupervisorGone:
                self._release()
                raise
            except BaseException:
                self.close()
                raise
        if self._pending:
            return self._pending.pop(0)
        if self.result is None and self._op.done:
            self._release()
            self.result = self._op.value()
        raise StopIteration

    def _release(self) -> None:
        if self._started:
            self._started = False
            self._client._active.pop(self._op.request_id, None)
            self._client._lock.release()

    def close(self) -> None:
        """Cancels the command if it is still running."""
        if self._started and not self._op.done:
            self._client._abandon(self._op)
        self._release()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Scope:
    """A scope handle: exec, spawn, files and workers run in it. Closing it ends all of that."""

    def __init__(self, client: Client, id: str, temp_dir: str, created: bool) -> None:
        self.client, self.id, self.temp_dir, self._created = client, id, temp_dir, created
        self.closed = False

    def exec(self, command: w.Argv, **kwargs: Any) -> ExecResult:
        return self.client.exec(command, scope=self.id, **kwargs)

    def stream(self, command: w.Argv, **kwargs: Any) -> ExecStream:
        return self.client.stream(command, scope=self.id, **kwargs)

    def spawn(self, command: w.Argv, **kwargs: Any) -> "Background":
        return self.client.spawn(command, scope=self.id, **kwargs)

    def read(self, path: str, **kwargs: Any) -> FileWindow:
        return self.client.read(path, scope=self.id, **kwargs)

    def read_bytes(self, path: str, max_bytes: Optional[int] = None, **kwargs: Any) -> bytes:
        return self.client.read_bytes(path, max_bytes, scope=self.id, **kwargs)

    def write(self, path: str, data: Union[str, bytes], **kwargs: Any) -> int:
        return self.client.write(path, data, scope=self.id, **kwargs)

    def ls(self, path: str = ".", **kwargs: Any) -> List[DirEntry]:
        return self.client.ls(path, scope=self.id, **kwargs)

    def worker(self, name: str, **kwargs: Any) -> "Worker":
        return self.client.worker(name, scope=self.id, **kwargs)

    def scope(self, **kwargs: Any) -> "Scope":
        """A child scope (its policy narrows this one's)."""
        return self.client.scope(parent=self.id, **kwargs)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.close_scope(self.id)

    def __enter__(self) -> "Scope":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._created:
            self.close()


class Background:
    """A background command: poll() for new output, wait() for the end, stop() to end it."""

    def __init__(self, client: Client, id: str, scope: str) -> None:
        self.client, self.id, self.scope = client, id, scope
        self._out: List[bytes] = []
        self._err: List[bytes] = []
        self.result: Optional[ExecResult] = None
        self._state = "running"

    def poll(self) -> PollResult:
        """Output since the previous poll, and the state; once it has ended, its result (then
        the supervisor forgets the command)."""
        if self.result is not None:
            return PollResult(self._state, b"", b"", self.result)
        p = self.client._poll(self.id)
        self._state = p.state
        self._out.append(p.stdout)
        self._err.append(p.stderr)
        if p.result is not None:
            p.result.stdout, p.result.stderr = b"".join(self._out), b"".join(self._err)
            self.result = p.result
        return p

    def wait(self, timeout: Optional[float] = None, interval: float = 0.05) -> ExecResult:
        """Polls until the command ends; its ExecResult carries all its output. Raises
        TimeoutError (the command keeps running) when `timeout` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            p = self.poll()
            if p.result is not None:
                return p.result
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("background command %s still runs after %ss" % (self.id, timeout))
            time.sleep(interval)
            interval = min(interval * 2, 0.5)

    def stop(self, force: bool = False) -> None:
        """Stops it (SIGTERM, grace, SIGKILL; force: SIGKILL now)."""
        self.client._stop(self.id, force)


class Worker:
    """A persistent worker. eval() (Python workers) or request() (raw bytes) one at a time."""

    def __init__(self, client: Client, name: str, scope: str, python: bool) -> None:
        self.client, self.name, self.scope, self.python = client, name, scope, python

    def eval(self, code: str, timeout: Optional[float] = None,
             host: Optional[HostHandler] = None) -> EvalResult:
        """Evaluates Python `code` in the worker's persistent namespace. `host(bytes) -> bytes`
        answers the code's host_call(b"...") (an exception becomes the call's error). Raises
        TimedOut past `timeout` seconds and StateLost after a crash (then reset())."""
        return w.eval_result(self.request(w.python_request(code), timeout, host))

    def request(self, data: bytes, timeout: Optional[float] = None,
                host: Optional[HostHandler] = None, reset: bool = False) -> bytes:
        """One raw evaluation: `data` in, the worker's reply bytes out."""
        return self.client._worker_eval(self.name, self.scope, data, timeout, reset, host)

    def reset(self) -> None:
        """Starts a fresh worker process (after a lost state, or to forget everything)."""
        self.client._worker_eval(self.name, self.scope, w.python_request("None") if self.python else b"",
                                 None, True, None)

    def stop(self, force: bool = False) -> None:
        self.client._worker_stop(self.name, self.scope, force)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.stop()
        except errors.CorralError:
            pass

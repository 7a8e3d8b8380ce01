"""The asyncio client: the same methods as Client, as coroutines, with any number of requests in
flight on one connection. A reader task routes every frame to its request by id. Cancelling a
task that awaits a request cancels the request on the supervisor (nothing it started keeps
running). Host-call handlers and authorizers may be plain callables or coroutine functions.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import (Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from . import _wire as w
from . import errors
from ._sync import Client as _SyncClient
from .results import Caps, Chunk, DirEntry, EvalResult, ExecResult, FileWindow, Layer, PollResult

AsyncAuthorizer = Callable[[Dict[str, Any]], Any]
AsyncHostHandler = Callable[[bytes], Any]


class _Pending:
    def __init__(self, op: w.Op) -> None:
        self.op = op
        self.future: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.abandoned = False


class AsyncClient:
    """Use `await AsyncClient.connect()` (or connect_async()); `await close()` or `async with`."""

    def __init__(self) -> None:
        self.socket_path = ""
        self.server_version = ""
        self.layers: List[Layer] = []
        self.max_frame = w.MAX_FRAME
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._pending: Dict[int, _Pending] = {}
        self._next_id = 1
        self._gone: Optional[errors.CorralError] = None
        self._send_lock = asyncio.Lock()

    @classmethod
    async def connect(cls, socket: Optional[str] = None, timeout: Optional[float] = 10.0) -> "AsyncClient":
        """Connects to `socket` (None: default_socket_path()) and says hello."""
        self = cls()
        self.socket_path = socket or w.default_socket_path()
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.socket_path, limit=1 << 20), timeout)
            self._writer.write(w.hello())
            reply = await asyncio.wait_for(self._recv(), timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            await self.close()
            raise errors.SupervisorGone("cannot reach the corral supervisor at %s: %s"
                                        % (self.socket_path, e or type(e).__name__)) from None
        if reply.kind == w.B.Error:
            await self.close()
            w.raise_error(reply)
        if reply.kind != w.B.HelloReply:
            await self.close()
            raise errors.ProtocolError("expected HelloReply, got %s" % reply.kind_name)
        self.server_version = w.text(reply.body.ServerVersion())
        self.layers = w.layers(reply.body)
        self.max_frame = min(reply.body.MaxFrameBytes() or w.MAX_FRAME, w.MAX_FRAME)
        self._task = asyncio.get_running_loop().create_task(self._read_loop())
        return self

    async def close(self) -> None:
        """Closes the connection; the supervisor ends whatever runs in its implicit scope."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
            self._writer = None
        self._fail_all(errors.SupervisorGone("the client closed the connection"))

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # --- frames -----------------------------------------------------------------------------

    async def _recv(self) -> w.Msg:
        assert self._reader is not None
        (n,) = w.HEADER.unpack(await self._reader.readexactly(w.HEADER.size))
        if n > self.max_frame:
            raise errors.ProtocolError("a frame of %d bytes is over the %d-byte limit" % (n, self.max_frame))
        return w.decode(await self._reader.readexactly(n))

    async def _send(self, data: bytes) -> None:
        if self._gone is not None:
            raise type(self._gone)(str(self._gone))
        if self._writer is None:
            raise errors.SupervisorGone("the connection is closed")
        async with self._send_lock:
            try:
                self._writer.write(data)
                await self._writer.drain()
            except OSError as e:
                raise errors.SupervisorGone("the connection to the supervisor failed: %s" % e) from None

    def _fail_all(self, error: errors.CorralError) -> None:
        if self._gone is None:
            self._gone = error
        for p in self._pending.values():
            if not p.future.done():
                p.future.set_exception(type(error)(str(error)))
        self._pending.clear()

    async def _read_loop(self) -> None:
        try:
            while True:
                msg = await self._recv()
                if msg.request_id == 0 and msg.kind == w.B.Error:
                    try:
                        w.raise_error(msg)
                    except errors.CorralError as e:
                        self._fail_all(e)
                    return
                p = self._pending.get(msg.request_id)
                if p is None:
                    continue
                if p.abandoned:
                    answer = p.op.feed_abandoned(msg)
                    if answer:
                        await self._send(answer)
                else:
                    action = p.op.feed(msg)
                    if isinstance(action, w.Callback):
                        asyncio.get_running_loop().create_task(self._answer(action))
                    elif action:
                        await self._send(action)
                if p.op.done:
                    self._pending.pop(msg.request_id, None)
                    if not p.future.done():
                        p.future.set_result(None)
        except (asyncio.IncompleteReadError, OSError):
            self._fail_all(errors.SupervisorGone("the supervisor closed the connection"))
        except errors.CorralError as e:
            self._fail_all(e)

    async def _answer(self, cb: w.Callback) -> None:
        try:
            value = cb.fn(*cb.args)
            if inspect.isawaitable(value):
                value = await value
            frame = cb.answer(value)
        except Exception as e:
            frame = cb.fail(e)
        if frame:
            try:
                await self._send(frame)
            except errors.CorralError:
                pass

    def _id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    async def _drive(self, op: w.Op, request: bytes) -> Any:
        p = _Pending(op)
        self._pending[op.request_id] = p
        try:
            await self._send(request)
            await asyncio.shield(p.future)
        except asyncio.CancelledError:
            if not op.done and op.request_id in self._pending:
                p.abandoned = True  # the reader drains it to its final reply
                try:
                    await self._send(w.cancel(op.request_id, True))
                except errors.CorralError:
                    pass
            raise
        except BaseException:
            self._pending.pop(op.request_id, None)
            raise
        return op.value()

    async def _simple(self, request: bytes, request_id: int, expect: int) -> Any:
        return await self._drive(w.Op(request_id, expect), request)

    # --- the same methods as Client ---------------------------------------------------------

    async def status(self) -> Dict[str, Any]:
        rid = self._id()
        return w.status_dict(await self._simple(w.status_request(rid), rid, w.B.StatusReply))

    async def exec(self, command: w.Argv, *, on_output: Optional[Callable[[Chunk], None]] = None,
                   authorizer: Optional[AsyncAuthorizer] = None, **kwargs: Any) -> ExecResult:
        """Client.exec as a coroutine (same keywords: timeout, env, cwd, stdin, mode, network,
        workspaces, deny_read, protect, binds, caps, max_output, scope)."""
        rid = self._id()
        args = _SyncClient._exec_args(command, _scoped(kwargs))
        args.authorize = authorizer is not None
        return await self._drive(w.ExecOp(rid, on_output, authorizer), w.exec_request(rid, args))

    async def stream(self, command: w.Argv, **kwargs: Any) -> AsyncIterator[Chunk]:
        """Output as an async iterator of Chunk. Breaking out of the loop cancels the command;
        a refused request raises from the iteration."""
        queue: "asyncio.Queue[Optional[Chunk]]" = asyncio.Queue()
        rid = self._id()
        op = w.ExecOp(rid, queue.put_nowait, keep=False)
        args = _SyncClient._exec_args(command, _scoped(kwargs))
        task = asyncio.get_running_loop().create_task(self._drive(op, w.exec_request(rid, args)))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while True:
                chunk = await queue.get()
                if chunk is None:
                    break
                yield chunk
            await task
        finally:
            if not task.done():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, errors.CorralError):
                    pass

    async def spawn(self, command: w.Argv, **kwargs: Any) -> "AsyncBackground":
        rid = self._id()
        args = _SyncClient._exec_args(command, _scoped(kwargs))
        args.background = True
        body = await self._simple(w.exec_request(rid, args), rid, w.B.BackgroundStarted)
        return AsyncBackground(self, w.text(body.Id()), w.text(body.Scope()))

    async def scope(self, id: Optional[str] = None, *, parent: Optional[str] = None,
                    detach: bool = False, mode: Optional[w.Mode] = None,
                    network: Optional[w.Network] = None, workspaces: Sequence[str] = (),
                    deny_read: Sequence[str] = (), protect: Sequence[str] = (),
                    caps: Optional[Caps] = None) -> "AsyncScope":
        if id is not None:
            return AsyncScope(self, id, "", created=False)
        rid = self._id()
        body = await self._simple(w.scope_create(rid, parent, detach, mode, network, workspaces, deny_read,
                                          protect, caps), rid,
                                  w.B.ScopeCreated)
        return AsyncScope(self, w.text(body.Id()), w.text(body.TempDir()), created=True)

    async def close_scope(self, scope_id: str) -> None:
        rid = self._id()
        await self._simple(w.scope_close(rid, scope_id), rid, w.B.Ack)

    async def read(self, path: str, *, offset: int = 0, limit: Optional[int] = None,
                   workspaces: Sequence[str] = (), mode: Optional[w.Mode] = None,
                   scope: Any = None) -> FileWindow:
        rid = self._id()
        body = await self._simple(w.read_request(rid, path, False, offset, limit, workspaces, mode,
                                                 _sid(scope)), rid, w.B.ReadResult)
        return w.file_window(body)

    async def read_bytes(self, path: str, max_bytes: Optional[int] = None, *, offset: int = 0,
                         workspaces: Sequence[str] = (), mode: Optional[w.Mode] = None,
                         scope: Any = None) -> bytes:
        rid = self._id()
        body = await self._simple(w.read_request(rid, path, True, offset, max_bytes, workspaces, mode,
                                                 _sid(scope)), rid, w.B.ReadResult)
        return w.file_window(body).data

    async def write(self, path: str, data: Union[str, bytes], *, workspaces: Sequence[str] = (),
                    mode: Optional[w.Mode] = None, scope: Any = None) -> int:
        rid = self._id()
        body = await self._simple(w.write_request(rid, path, data, workspaces, mode, _sid(scope)), rid,
                                  w.B.WriteResult)
        return int(body.Bytes())

    async def ls(self, path: str = ".", *, max_entries: Optional[int] = None,
                 workspaces: Sequence[str] = (), mode: Optional[w.Mode] = None,
                 scope: Any = None) -> List[DirEntry]:
        rid = self._id()
        body = await self._simple(w.list_request(rid, path, max_entries, workspaces, mode, _sid(scope)),
                                  rid, w.B.ListResult)
        return w.dir_entries(body)

    async def worker(self, name: str, *, python: bool = False, argv: Optional[Sequence[str]] = None,
                     scope: Any = None, env: Optional[Mapping[str, str]] = None,
                     mode: Optional[w.Mode] = None, network: Optional[w.Network] = None,
                     workspaces: Sequence[str] = (), caps: Optional[Caps] = None,
                     idle_timeout: Optional[float] = None) -> "AsyncWorker":
        if not python and not argv:
            raise ValueError("worker() needs python=True or argv")
        rid = self._id()
        body = await self._simple(w.worker_start(rid, name, _sid(scope), argv, python, env, mode,
                                                 network, workspaces, caps, idle_timeout),
                                  rid, w.B.WorkerStarted)
        return AsyncWorker(self, w.text(body.Name()), w.text(body.Scope()), python)

    async def _worker_eval(self, name: str, scope: str, request: bytes, timeout: Optional[float],
                           reset: bool, host: Optional[AsyncHostHandler]) -> bytes:
        rid = self._id()
        frame = w.worker_eval(rid, name, scope, request, timeout, reset, host is not None)
        return await self._drive(w.EvalOp(rid, host), frame)

    async def _worker_stop(self, name: str, scope: str, force: bool) -> None:
        rid = self._id()
        await self._simple(w.worker_stop(rid, name, scope, force), rid, w.B.Ack)

    async def _poll(self, background_id: str) -> PollResult:
        rid = self._id()
        return w.poll_result(await self._simple(w.poll(rid, background_id), rid, w.B.PollReply))

    async def _stop(self, background_id: str, force: bool) -> None:
        rid = self._id()
        await self._simple(w.background_stop(rid, background_id, force), rid, w.B.Ack)


async def connect_async(socket: Optional[str] = None) -> AsyncClient:
    """AsyncClient.connect(socket)."""
    return await AsyncClient.connect(socket)


def _sid(scope: Any) -> Optional[str]:
    return scope.id if isinstance(scope, AsyncScope) else scope


def _scoped(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    if isinstance(kwargs.get("scope"), AsyncScope):
        kwargs = dict(kwargs, scope=kwargs["scope"].id)
    return kwargs


class AsyncScope:
    """Scope for AsyncClient; `async with` closes a scope this client created."""

    def __init__(self, client: AsyncClient, id: str, temp_dir: str, created: bool) -> None:
        self.client, self.id, self.temp_dir, self._created = client, id, temp_dir, created
        self.closed = False

    async def exec(self, command: w.Argv, **kwargs: Any) -> ExecResult:
        return await self.client.exec(command, scope=self.id, **kwargs)

    def stream(self, command: w.Argv, **kwargs: Any) -> AsyncIterator[Chunk]:
        return self.client.stream(command, scope=self.id, **kwargs)

    async def spawn(self, command: w.Argv, **kwargs: Any) -> "AsyncBackground":
        return await self.client.spawn(command, scope=self.id, **kwargs)

    async def read(self, path: str, **kwargs: Any) -> FileWindow:
        return await self.client.read(path, scope=self.id, **kwargs)

    async def read_bytes(self, path: str, max_bytes: Optional[int] = None, **kwargs: Any) -> bytes:
        return await self.client.read_bytes(path, max_bytes, scope=self.id, **kwargs)

    async def write(self, path: str, data: Union[str, bytes], **kwargs: Any) -> int:
        return await self.client.write(path, data, scope=self.id, **kwargs)

    async def ls(self, path: str = ".", **kwargs: Any) -> List[DirEntry]:
        return await self.client.ls(path, scope=self.id, **kwargs)

    async def worker(self, name: str, **kwargs: Any) -> "AsyncWorker":
        return await self.client.worker(name, scope=self.id, **kwargs)

    async def scope(self, **kwargs: Any) -> "AsyncScope":
        return await self.client.scope(parent=self.id, **kwargs)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.client.close_scope(self.id)

    async def __aenter__(self) -> "AsyncScope":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._created:
            await self.close()


class AsyncBackground:
    def __init__(self, client: AsyncClient, id: str, scope: str) -> None:
        self.client, self.id, self.scope = client, id, scope
        self._out: List[bytes] = []
        self._err: List[bytes] = []
        self._state = "running"
        self.result: Optional[ExecResult] = None

    async def poll(self) -> PollResult:
        if self.result is not None:
            return PollResult(self._state, b"", b"", self.result)
        p = await self.client._poll(self.id)
        self._state = p.state
        self._out.append(p.stdout)
        self._err.append(p.stderr)
        if p.result is not None:
            p.result.stdout, p.result.stderr = b"".join(self._out), b"".join(self._err)
            self.result = p.result
        return p

    async def wait(self, timeout: Optional[float] = None, interval: float = 0.05) -> ExecResult:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            p = await self.poll()
            if p.result is not None:
                return p.result
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError("background command %s still runs after %ss" % (self.id, timeout))
            await asyncio.sleep(interval)
            interval = min(interval * 2, 0.5)

    async def stop(self, force: bool = False) -> None:
        await self.client._stop(self.id, force)


class AsyncWorker:
    def __init__(self, client: AsyncClient, name: str, scope: str, python: bool) -> None:
        self.client, self.name, self.scope, self.python = client, name, scope, python

    async def eval(self, code: str, timeout: Optional[float] = None,
                   host: Optional[AsyncHostHandler] = None) -> EvalResult:
        return w.eval_result(await self.request(w.python_request(code), timeout, host))

    async def request(self, data: bytes, timeout: Optional[float] = None,
                      host: Optional[AsyncHostHandler] = None, reset: bool = False) -> bytes:
        return await self.client._worker_eval(self.name, self.scope, data, timeout, reset, host)

    async def reset(self) -> None:
        await self.client._worker_eval(self.name, self.scope,
                                       w.python_request("None") if self.python else b"", None, True, None)

    async def stop(self, force: bool = False) -> None:
        await self.client._worker_stop(self.name, self.scope, force)

    async def __aenter__(self) -> "AsyncWorker":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.stop()
        except errors.CorralError:
            pass

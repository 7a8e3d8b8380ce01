"""Frames and messages for corral_client: no I/O here, so the sync and asyncio clients share it.

A frame is a u32 little-endian length and one FlatBuffers `Message` (file identifier "CRL1"),
built and read with the generated package corral.proto (docs/protocol.md). Each request is
driven by an `Op`: it is fed every message carrying its request id and says what to send back
(an authorization answer, a host-call reply) and when the final reply has arrived.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import flatbuffers

try:
    from corral.proto import (Ack, Authorization, AuthorizationRequest, BackgroundStarted,
                              BackgroundStop, Bind, Body, Cancel, EnvVar, Error, ErrorCode,
                              ExecRequest, ExecResult as ExecResultTable, ExitStatus, Hello,
                              HelloReply, HostCall, HostReply, ListRequest, ListResult, Message,
                              Mode as ModeEnum, Network as NetworkEnum, OutputChunk, Poll,
                              PollReply, ReadRequest, ReadResult, ScopeClose, ScopeCreate,
                              ScopeCreated, StatusReply, StatusRequest, WorkerEval,
                              WorkerEvalResult, WorkerStart, WorkerStarted, WorkerStop,
                              WriteRequest, WriteResult)
except ImportError as e:  # pragma: no cover - a setup problem, said plainly
    raise ImportError(
        "corral_client needs the generated package corral.proto (build/share/corral/python, or "
        "the installed <prefix>/share/corral/python) on sys.path and Debian's python3-flatbuffers "
        "(run with /usr/bin/python3): %s" % e) from None

from . import errors
from .results import (Caps, Chunk, DirEntry, EvalResult, ExecResult, FileWindow, Layer, PollResult,
                    Timings)

PROTOCOL_VERSION = 1
IDENTIFIER = b"CRL1"
HEADER = struct.Struct("<I")
MAX_FRAME = 64 << 20  # inbound frames over this are refused before their payload is read

Mode = str     # "read-only" | "workspace-write" | "danger-full-access"
Network = str  # "denied" | "allowed"
Argv = Union[str, Sequence[str]]  # a str is a shell command run by /bin/sh -c

_MODES = {"read-only": ModeEnum.Mode.read_only, "workspace-write": ModeEnum.Mode.workspace_write,
          "danger-full-access": ModeEnum.Mode.danger_full_access}
_NETWORKS = {"denied": NetworkEnum.Network.denied, "allowed": NetworkEnum.Network.allowed}
_STATUS_NAMES = {v: k for k, v in vars(ExitStatus.ExitStatus).items() if not k.startswith("_")}
_ERROR_NAMES = {v: k for k, v in vars(ErrorCode.ErrorCode).items() if not k.startswith("_")}
_BODY_NAMES = {v: k for k, v in vars(Body.Body).items() if not k.startswith("_")}


def default_socket_path() -> str:
    """$CORRAL_SOCKET, else $XDG_RUNTIME_DIR/corral/corral.sock, else /run/corral/corral.sock
    for root, else /tmp/corral-$UID/corral.sock (README "Socket")."""
    if os.environ.get("CORRAL_SOCKET"):
        return os.environ["CORRAL_SOCKET"]
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "corral", "corral.sock")
    if os.geteuid() == 0:
        return "/run/corral/corral.sock"
    return "/tmp/corral-%d/corral.sock" % os.geteuid()


# --- encoding ---------------------------------------------------------------------------------

def _mode(value: Optional[Mode]) -> Optional[int]:
    if value is None:
        return None
    try:
        return _MODES[value]
    except KeyError:
        raise ValueError("mode must be one of %s, got %r" % (", ".join(_MODES), value)) from None


def _network(value: Optional[Network]) -> Optional[int]:
    if value is None:
        return None
    try:
        return _NETWORKS[value]
    except KeyError:
        raise ValueError("network must be 'denied' or 'allowed', got %r" % (value,)) from None


def _ms(seconds: Optional[float], what: str) -> Optional[int]:
    if seconds is None:
        return None
    if seconds <= 0:
        raise ValueError("%s must be positive seconds, got %r" % (what, seconds))
    return max(1, int(round(seconds * 1000)))


def _bytes(data: Union[str, bytes, bytearray, memoryview]) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def _strings(b: flatbuffers.Builder, module: Any, name: str, values: Sequence[str]) -> int:
    offsets = [b.CreateString(v) for v in values]
    getattr(module, "Start%sVector" % name)(b, len(offsets))
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _tables(b: flatbuffers.Builder, module: Any, name: str, offsets: Sequence[int]) -> int:
    getattr(module, "Start%sVector" % name)(b, len(offsets))
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _table(b: flatbuffers.Builder, module: Any, fields: Sequence[Tuple[str, Any]]) -> int:
    """Builds one table of `module` from (FieldName, value) pairs. None is "not set on the wire";
    str, bytes and lists of str become strings and vectors; ("@", offset) passes a built one."""
    resolved: List[Tuple[str, Any]] = []
    for name, value in fields:
        if value is None:
            continue
        if isinstance(value, str):
            value = ("@", b.CreateString(value))
        elif isinstance(value, (bytes, bytearray, memoryview)):
            value = ("@", b.CreateByteVector(bytes(value)))
        elif isinstance(value, list):
            value = ("@", _strings(b, module, name, value))
        resolved.append((name, value))
    module.Start(b)
    for name, value in resolved:
        adder = getattr(module, "Add" + name)
        adder(b, value[1] if isinstance(value, tuple) else value)
    return module.End(b)


def frame(request_id: int, body_type: int, build: Callable[[flatbuffers.Builder], int],
          size_hint: int = 256) -> bytes:
    """One complete frame: header + Message{request_id, body}."""
    b = flatbuffers.Builder(size_hint + 256)
    body = build(b)
    Message.Start(b)
    Message.AddRequestId(b, request_id)
    Message.AddBodyType(b, body_type)
    Message.AddBody(b, body)
    # Not FinishSizePrefixed: the supervisor's Verifier checks alignment from the payload start.
    b.Finish(Message.End(b), IDENTIFIER)
    payload = bytes(b.Output())
    return HEADER.pack(len(payload)) + payload


def hello() -> bytes:
    return frame(0, Body.Body.Hello, lambda b: _table(b, Hello, [
        ("ProtocolVersion", PROTOCOL_VERSION), ("ClientName", "corral-python")]))


@dataclass
class ExecArgs:
    """What an ExecRequest carries; see Client.exec for the meaning of each field."""
    command: Argv
    timeout: Optional[float] = None
    env: Optional[Mapping[str, str]] = None
    cwd: Optional[str] = None
    stdin: Optional[bytes] = None
    mode: Optional[Mode] = None
    network: Optional[Network] = None
    workspaces: Sequence[str] = ()
    deny_read: Sequence[str] = ()
    protect: Sequence[str] = ()
    binds: Sequence[Tuple[str, str, bool]] = ()
    caps: Optional[Union[Caps, Mapping[str, float]]] = None
    max_output: Optional[int] = None
    grace: Optional[float] = None
    scope: Optional[str] = None
    background: bool = False
    authorize: bool = False


def exec_request(request_id: int, a: ExecArgs) -> bytes:
    caps = a.caps if isinstance(a.caps, Caps) or a.caps is None else Caps(**a.caps)
    if isinstance(a.command, (bytes, bytearray)):
        raise TypeError("command must be a str (a shell command) or a sequence of str (argv)")
    shell = a.command if isinstance(a.command, str) else None
    argv = None if shell is not None else [str(x) for x in a.command]
    if argv is not None and not argv:
        raise ValueError("argv is empty")

    def build(b: flatbuffers.Builder) -> int:
        env = None
        if a.env:
            env = ("@", _tables(b, ExecRequest, "Env", [
                _table(b, EnvVar, [("Name", str(k)), ("Value", str(v))]) for k, v in a.env.items()]))
        binds = None
        if a.binds:
            binds = ("@", _tables(b, ExecRequest, "Binds", [
                _table(b, Bind, [("Source", s), ("Target", t), ("Writable", bool(w) or None)])
                for s, t, w in a.binds]))
        return _table(b, ExecRequest, [
            ("Argv", argv), ("Shell", shell), ("Env", env), ("Cwd", a.cwd),
            ("Stdin", None if a.stdin is None else _bytes(a.stdin)),
            ("TimeoutMs", _ms(a.timeout, "timeout")), ("GraceMs", _ms(a.grace, "grace")),
            ("MaxOutputBytes", a.max_output), ("Mode", _mode(a.mode)),
            ("Network", _network(a.network)),
            ("Workspaces", list(a.workspaces) or None), ("DenyRead", list(a.deny_read) or None),
            ("Protect", list(a.protect) or None), ("Binds", binds),
            ("MemoryBytes", caps and caps.memory_bytes), ("Pids", caps and caps.pids),
            ("CpuTimeMs", caps and _ms(caps.cpu_time, "cpu_time")),
            ("Cpus", caps and caps.cpus), ("MaxFileSize", caps and caps.max_file_size),
            ("Scope", a.scope or None), ("Background", a.background or None),
            ("Authorize", a.authorize or None)])
    return frame(request_id, Body.Body.ExecRequest, build, len(a.stdin or b""))


def cancel(request_id: int, force: bool) -> bytes:
    return frame(request_id, Body.Body.Cancel, lambda b: _table(b, Cancel, [("Force", force or None)]))


def authorization(request_id: int, grant: bool, reason: str = "") -> bytes:
    return frame(request_id, Body.Body.Authorization, lambda b: _table(b, Authorization, [
        ("Grant", grant or None), ("Reason", reason or None)]))


def host_reply(request_id: int, call_id: int, data: bytes = b"", error: str = "") -> bytes:
    return frame(request_id, Body.Body.HostReply, lambda b: _table(b, HostReply, [
        ("CallId", call_id), ("Data", data), ("Error", error or None)]), len(data))


def status_request(request_id: int) -> bytes:
    return frame(request_id, Body.Body.StatusRequest, lambda b: _table(b, StatusRequest, []))


def scope_create(request_id: int, parent: Optional[str], detach: bool, mode: Optional[Mode],
                 network: Optional[Network], workspaces: Sequence[str], deny_read: Sequence[str] = (),
                 protect: Sequence[str] = (), caps: Optional[Union[Caps, Mapping[str, float]]] = None) -> bytes:
    caps = caps if isinstance(caps, Caps) or caps is None else Caps(**caps)
    return frame(request_id, Body.Body.ScopeCreate, lambda b: _table(b, ScopeCreate, [
        ("Parent", parent or None), ("Detach", detach or None), ("Mode", _mode(mode)),
        ("Network", _network(network)), ("Workspaces", list(workspaces) or None),
        ("DenyRead", list(deny_read) or None), ("Protect", list(protect) or None),
        ("MemoryBytes", caps and caps.memory_bytes), ("Pids", caps and caps.pids),
        ("CpuTimeMs", caps and _ms(caps.cpu_time, "cpu_time")), ("Cpus", caps and caps.cpus),
        ("MaxFileSize", caps and caps.max_file_size)]))


def scope_close(request_id: int, scope_id: str) -> bytes:
    return frame(request_id, Body.Body.ScopeClose, lambda b: _table(b, ScopeClose, [("Id", scope_id)]))


def poll(request_id: int, background_id: str) -> bytes:
    return frame(request_id, Body.Body.Poll, lambda b: _table(b, Poll, [("Id", background_id)]))


def background_stop(request_id: int, background_id: str, force: bool) -> bytes:
    return frame(request_id, Body.Body.BackgroundStop, lambda b: _table(b, BackgroundStop, [
        ("Id", background_id), ("Force", force or None)]))


def read_request(request_id: int, path: str, binary: bool, offset: int, max_bytes: Optional[int],
                 workspaces: Sequence[str], mode: Optional[Mode], scope: Optional[str]) -> bytes:
    return frame(request_id, Body.Body.ReadRequest, lambda b: _table(b, ReadRequest, [
        ("Path", path), ("Workspaces", list(workspaces) or None), ("Offset", offset or None),
        ("MaxBytes", max_bytes or None), ("Binary", binary or None), ("Mode", _mode(mode)),
        ("Scope", scope or None)]))


def write_request(request_id: int, path: str, data: Union[str, bytes], workspaces: Sequence[str],
                  mode: Optional[Mode], scope: Optional[str]) -> bytes:
    binary = not isinstance(data, str)
    payload = _bytes(data)
    return frame(request_id, Body.Body.WriteRequest, lambda b: _table(b, WriteRequest, [
        ("Path", path), ("Workspaces", list(workspaces) or None), ("Data", payload),
        ("Binary", binary or None), ("Mode", _mode(mode)), ("Scope", scope or None)]), len(payload))


def list_request(request_id: int, path: str, max_entries: Optional[int], workspaces: Sequence[str],
                 mode: Optional[Mode], scope: Optional[str]) -> bytes:
    return frame(request_id, Body.Body.ListRequest, lambda b: _table(b, ListRequest, [
        ("Path", path), ("Workspaces", list(workspaces) or None), ("MaxEntries", max_entries or None),
        ("Mode", _mode(mode)), ("Scope", scope or None)]))


def worker_start(request_id: int, name: str, scope: Optional[str], argv: Optional[Sequence[str]],
                 python: bool, env: Optional[Mapping[str, str]], mode: Optional[Mode],
                 network: Optional[Network], workspaces: Sequence[str], caps: Optional[Caps],
                 idle_timeout: Optional[float]) -> bytes:
    def build(b: flatbuffers.Builder) -> int:
        env_vec = None
        if env:
            env_vec = ("@", _tables(b, WorkerStart, "Env", [
                _table(b, EnvVar, [("Name", str(k)), ("Value", str(v))]) for k, v in env.items()]))
        return _table(b, WorkerStart, [
            ("Name", name), ("Scope", scope or None), ("Argv", list(argv) if argv else None),
            ("Env", env_vec), ("Mode", _mode(mode)), ("Network", _network(network)),
            ("Workspaces", list(workspaces) or None), ("MemoryBytes", caps and caps.memory_bytes),
            ("Pids", caps and caps.pids), ("Cpus", caps and caps.cpus),
            ("IdleTimeoutMs", _ms(idle_timeout, "idle_timeout")), ("Python", python or None)])
    return frame(request_id, Body.Body.WorkerStart, build)


def worker_eval(request_id: int, name: str, scope: Optional[str], request: bytes,
                timeout: Optional[float], reset: bool, serve_host_calls: bool) -> bytes:
    return frame(request_id, Body.Body.WorkerEval, lambda b: _table(b, WorkerEval, [
        ("Name", name), ("Scope", scope or None), ("Request", request),
        ("TimeoutMs", _ms(timeout, "timeout")), ("Reset", reset or None),
        ("ServeHostCalls", serve_host_calls or None)]), len(request))


def worker_stop(request_id: int, name: str, scope: Optional[str], force: bool) -> bytes:
    return frame(request_id, Body.Body.WorkerStop, lambda b: _table(b, WorkerStop, [
        ("Name", name), ("Scope", scope or None), ("Force", force or None)]))


# --- decoding ---------------------------------------------------------------------------------

@dataclass
class Msg:
    """One verified-by-reading inbound message: its request id, body kind and body table."""
    request_id: int
    kind: int
    body: Any

    @property
    def kind_name(self) -> str:
        return _BODY_NAMES.get(self.kind, "unknown body %d" % self.kind)


_BODY_CLASSES = {
    Body.Body.HelloReply: HelloReply.HelloReply, Body.Body.OutputChunk: OutputChunk.OutputChunk,
    Body.Body.ExecResult: ExecResultTable.ExecResult, Body.Body.StatusReply: StatusReply.StatusReply,
    Body.Body.Error: Error.Error, Body.Body.ReadResult: ReadResult.ReadResult,
    Body.Body.WriteResult: WriteResult.WriteResult, Body.Body.ListResult: ListResult.ListResult,
    Body.Body.ScopeCreated: ScopeCreated.ScopeCreated, Body.Body.Ack: Ack.Ack,
    Body.Body.BackgroundStarted: BackgroundStarted.BackgroundStarted,
    Body.Body.PollReply: PollReply.PollReply, Body.Body.WorkerStarted: WorkerStarted.WorkerStarted,
    Body.Body.WorkerEvalResult: WorkerEvalResult.WorkerEvalResult,
    Body.Body.HostCall: HostCall.HostCall,
    Body.Body.AuthorizationRequest: AuthorizationRequest.AuthorizationRequest,
}


def vector_bytes(obj: Any, field_id: int) -> bytes:
    """A [ubyte] field as bytes (b"" when absent), bounds-checked against the buffer. Field ids
    never change (schema evolution rules), so the vtable slot 4 + 2 * id is stable."""
    tab = obj._tab
    o = tab.Offset(4 + 2 * field_id)
    if o == 0:
        return b""
    start, n = tab.Vector(o), tab.VectorLen(o)
    if start + n > len(tab.Bytes):
        raise errors.ProtocolError("a byte vector runs past the end of its frame")
    return bytes(tab.Bytes[start:start + n])


def _text(s: Optional[bytes]) -> str:
    return s.decode("utf-8", "replace") if s else ""


def decode(payload: bytes) -> Msg:
    """Reads one payload. Python's FlatBuffers runtime has no Verifier, but every access is
    bounds-checked by struct, so bad bytes raise ProtocolError instead of misreading."""
    if len(payload) < 8 or payload[4:8] != IDENTIFIER:
        raise errors.ProtocolError("a frame without the CRL1 identifier")
    try:
        message = Message.Message.GetRootAs(payload, 0)
        kind = message.BodyType()
        cls = _BODY_CLASSES.get(kind)
        body = None
        if cls is not None:
            tab = message.Body()
            if tab is None:
                raise errors.ProtocolError("a message without a body")
            body = cls()
            body.Init(tab.Bytes, tab.Pos)
        return Msg(message.RequestId(), kind, body)
    except errors.ProtocolError:
        raise
    except Exception as e:  # struct.error, IndexError: bytes that are no Message
        raise errors.ProtocolError("malformed frame: %s" % e) from None


def raise_error(msg: Msg) -> None:
    """Raises the typed exception for an Error message."""
    code = msg.body.Code()
    raise errors.from_code(_ERROR_NAMES.get(code, str(code)), _text(msg.body.Message()))


def layers(table: Any) -> List[Layer]:
    out = []
    for i in range(table.LayersLength()):
        layer = table.Layers(i)
        out.append(Layer(_text(layer.Name()), bool(layer.Available()), _text(layer.Reason())))
    return out


def exec_result(t: Any, stdout: bytes, stderr: bytes) -> ExecResult:
    launched = t.Launched()
    return ExecResult(
        status=_STATUS_NAMES.get(t.Status(), str(t.Status())),
        exit_code=t.ExitCode(), signal=t.Signal(), timed_out=bool(t.TimedOut()),
        truncated=bool(t.OutputTruncated()), stdout=stdout, stderr=stderr,
        timings=Timings(wall_ms=t.WallMs(), user_cpu_ms=t.UserCpuMs(), sys_cpu_ms=t.SysCpuMs(),
                        max_rss_kb=t.MaxRssKb(), memory_peak_kb=t.MemoryPeakKb()),
        enforced=[_text(t.Enforced(i)) for i in range(t.EnforcedLength())],
        temp_dir=_text(t.TempDir()), message=_text(t.Message()),
        setup_step=_text(t.SetupStep()) or None, setup_errno=t.SetupErrno() or None,
        launched=None if launched is None else bool(launched))


# --- operations: one per request, fed the messages that carry its id ---------------------------

@dataclass
class Callback:
    """A user callable the driver must run (awaiting it when it returns an awaitable), then
    turn its outcome into the frame to send with `answer(value)` or `fail(exception)`."""
    fn: Callable[..., Any]
    args: Tuple[Any, ...]
    answer: Callable[[Any], Optional[bytes]]
    fail: Callable[[BaseException], Optional[bytes]]


class Op:
    """One request in flight. feed() returns None, a frame to send, or a Callback; once the
    final reply has arrived `done` is True and value() returns the result or raises."""

    def __init__(self, request_id: int, expect: int) -> None:
        self.request_id, self.expect = request_id, expect
        self.done = False
        self._final: Optional[Msg] = None

    def feed(self, msg: Msg) -> Union[None, bytes, Callback]:
        if msg.kind == Body.Body.OutputChunk or msg.kind == Body.Body.HostCall or \
                msg.kind == Body.Body.AuthorizationRequest:
            return self.interim(msg)
        self.done, self._final = True, msg
        return None

    def interim(self, msg: Msg) -> Union[None, bytes, Callback]:
        return None

    def feed_abandoned(self, msg: Msg) -> Optional[bytes]:
        """feed() for a request being cancelled: nobody asks the user any more."""
        if msg.kind == Body.Body.AuthorizationRequest:
            return authorization(self.request_id, False, "the client abandoned the request")
        if msg.kind == Body.Body.HostCall:
            return host_reply(self.request_id, msg.body.CallId(), error="the client abandoned the evaluation")
        if msg.kind != Body.Body.OutputChunk:
            self.done, self._final = True, msg
        return None

    def value(self) -> Any:
        msg = self._final
        assert msg is not None
        if msg.kind == Body.Body.Error:
            raise_error(msg)
        if msg.kind != self.expect:
            raise errors.ProtocolError("expected %s, got %s" % (_BODY_NAMES.get(self.expect), msg.kind_name))
        return self.convert(msg.body)

    def convert(self, body: Any) -> Any:
        return body


def _grant_reply(request_id: int, value: Any) -> bytes:
    if isinstance(value, tuple):
        grant, reason = bool(value[0]), str(value[1])
    else:
        grant, reason = bool(value), ""
    return authorization(request_id, grant, reason if not grant else "")


class ExecOp(Op):
    """An ExecRequest: chunks go to `on_chunk` (and are kept), an AuthorizationRequest goes to
    `authorizer` (no authorizer denies)."""

    def __init__(self, request_id: int, on_chunk: Optional[Callable[[Chunk], None]] = None,
                 authorizer: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 keep: bool = True) -> None:
        super().__init__(request_id, Body.Body.ExecResult)
        self.on_chunk, self.authorizer, self.keep = on_chunk, authorizer, keep
        self.out: List[bytes] = []
        self.err: List[bytes] = []

    def interim(self, msg: Msg) -> Union[None, bytes, Callback]:
        if msg.kind == Body.Body.OutputChunk:
            chunk = Chunk("stderr" if msg.body.Stream() == 1 else "stdout", vector_bytes(msg.body, 1))
            if self.keep:
                (self.err if chunk.stream == "stderr" else self.out).append(chunk.data)
            if self.on_chunk is not None:
                self.on_chunk(chunk)
            return None
        if msg.kind == Body.Body.AuthorizationRequest:
            rid = self.request_id
            if self.authorizer is None:
                return authorization(rid, False, "the client has no authorizer")
            try:
                description = json.loads(_text(msg.body.Description()) or "{}")
            except ValueError:
                description = {"raw": _text(msg.body.Description())}
            return Callback(self.authorizer, (description,), lambda v: _grant_reply(rid, v),
                            lambda e: authorization(rid, False, "the authorizer raised %r" % e))
        return None

    def convert(self, body: Any) -> ExecResult:
        return exec_result(body, b"".join(self.out), b"".join(self.err))


class EvalOp(Op):
    """A WorkerEval: HostCalls go to `host` (bytes -> bytes); without one, they are refused."""

    def __init__(self, request_id: int, host: Optional[Callable[[bytes], Any]]) -> None:
        super().__init__(request_id, Body.Body.WorkerEvalResult)
        self.host = host

    def interim(self, msg: Msg) -> Union[None, bytes, Callback]:
        if msg.kind != Body.Body.HostCall:
            return None
        rid, call_id = self.request_id, msg.body.CallId()
        data = vector_bytes(msg.body, 1)
        if self.host is None:
            return host_reply(rid, call_id, error="this evaluation serves no host calls")
        return Callback(self.host, (data,), lambda v: host_reply(rid, call_id, _bytes(v if v is not None else b"")),
                        lambda e: host_reply(rid, call_id, error="%s: %s" % (type(e).__name__, e)))

    def convert(self, body: Any) -> bytes:
        return vector_bytes(body, 0)


def python_request(code: str) -> bytes:
    return json.dumps({"code": code}).encode()


def eval_result(reply: bytes) -> EvalResult:
    try:
        r = json.loads(reply.decode("utf-8", "replace"))
    except ValueError:
        r = None
    if not isinstance(r, dict):  # e.g. "corral worker error: ..." from the SDK itself
        text = reply.decode("utf-8", "replace")
        return EvalResult(ok=False, value=None, stdout="", stderr="", error=text.strip().splitlines()[-1] if text.strip() else "no reply",
                          traceback=text)
    tb = r.get("error")
    last = tb.strip().splitlines()[-1] if tb and tb.strip() else None
    return EvalResult(ok=bool(r.get("ok")), value=r.get("result"), stdout=r.get("stdout") or "",
                      stderr=r.get("stderr") or "", error=last, traceback=tb)


def file_window(body: Any) -> FileWindow:
    return FileWindow(data=vector_bytes(body, 0), offset=body.Offset(), file_size=body.FileSize(),
                      truncated=bool(body.Truncated()))


def dir_entries(body: Any) -> List[DirEntry]:
    out = []
    for i in range(body.EntriesLength()):
        e = body.Entries(i)
        out.append(DirEntry(_text(e.Name()), _text(e.Type()), e.Size(), e.MtimeMs()))
    return out


def poll_result(body: Any) -> PollResult:
    result_table = body.Result()
    stdout, stderr = vector_bytes(body, 2), vector_bytes(body, 3)
    return PollResult(state=_text(body.State()), stdout=stdout, stderr=stderr,
                      result=None if result_table is None else exec_result(result_table, b"", b""))


def status_dict(body: Any) -> Dict[str, Any]:
    defaults = []
    for i in range(body.DefaultsLength()):
        b = body.Defaults(i)
        defaults.append({"name": _text(b.Name()), "value": b.Value(), "enforced": bool(b.Enforced()),
                         "how": _text(b.How())})
    return {"server_version": _text(body.ServerVersion()), "protocol_version": body.ProtocolVersion(),
            "pid": body.Pid(), "uptime_ms": body.UptimeMs(), "connections": body.Connections(),
            "running_commands": body.RunningCommands(), "socket_path": _text(body.SocketPath()),
            "layers": layers(body), "defaults": defaults}


def text(s: Optional[bytes]) -> str:
    return _text(s)


B = Body.Body  # body type numbers, for the drivers

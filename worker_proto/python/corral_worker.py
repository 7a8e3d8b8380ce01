"""The worker side of a corral worker channel (docs/protocol.md "Between the supervisor and a worker"), in Python.

The C++ twin is worker_proto/worker_sdk.h. Needs the stdlib, the flatbuffers runtime and the
generated package corral.proto (built into build/worker_proto/python by the target
corral_python_proto; put that directory on sys.path). The flatbuffers runtime is Debian's
python3-flatbuffers (tools/setup.sh), which only /usr/bin/python3 sees: run workers with
/usr/bin/python3, not a pyenv python3 that happens to be first on PATH.

The supervisor starts the worker with one end of a socketpair as the fd named by
CORRAL_WORKER_FD; stdout/stderr stay plain logs. On that fd every frame is a u32 little-endian
length followed by one FlatBuffers `Message` (file identifier "CRL1"):

    supervisor -> worker  Message{N, Evaluate{data}}        evaluation N (one at a time)
    worker -> supervisor  Message{N, HostCall{id, data}}    during N, any number in flight
    supervisor -> worker  Message{N, HostReply{id, data, error}}
    worker -> supervisor  Message{N, EvalReply{data}}       ends evaluation N
    supervisor -> worker  Message{0, Error{code, message}}  the worker broke the protocol

EOF on the fd means the supervisor is gone: serve() returns and the worker should exit.

    worker = Worker()
    worker.serve(lambda request: b"echo:" + request + worker.host_call(b"question"))

Not thread-safe: call host_call from the thread running the handler.
"""

import os
import struct
import sys
import traceback

import flatbuffers
from corral.proto import Body, Error, EvalReply, Evaluate, HostCall, HostReply, Message

MAX_FRAME = 64 << 20  # frames over this are refused, both ways
_IDENTIFIER = b"CRL1"
_HEADER = struct.Struct("<I")


class HostCallError(Exception):
    """A host call failed: the host answered with an error, or the channel is gone."""


class ProtocolError(Exception):
    """The channel is unusable: bad frame, I/O error, or an Error frame from the supervisor."""


def _log(line):
    # sys.__stderr__: a handler may have redirected sys.stderr (the eval worker does).
    print("corral worker: " + line, file=sys.__stderr__, flush=True)


def _bytes_field(table, field_id):
    """A [ubyte] field of a table as bytes (b"" when absent). Field ids never change (schema
    evolution rules), so the vtable slot 4 + 2 * id is stable."""
    o = table.Offset(4 + 2 * field_id)
    if o == 0:
        return b""
    start, n = table.Vector(o), table.VectorLen(o)
    if start + n > len(table.Bytes):
        raise ProtocolError("a byte vector runs past the end of its frame")
    return bytes(table.Bytes[start:start + n])


def _as_bytes(data):
    """bytes from bytes-like data, or from str as UTF-8; TypeError for anything else."""
    return data.encode() if isinstance(data, str) else memoryview(data).tobytes()


class _Message:
    """One decoded inbound message: only the fields the worker side reads."""

    def __init__(self, request_id, kind, data=b"", call_id=0, error="", code=0):
        self.request_id, self.kind, self.data = request_id, kind, data
        self.call_id, self.error, self.code = call_id, error, code


def _decode(payload):
    """The one place inbound FlatBuffers are read. The Python runtime has no Verifier, but
    every access is bounds-checked by struct, so bad bytes raise instead of misreading."""

    def body(cls):
        obj, tab = cls(), message.Body()
        obj.Init(tab.Bytes, tab.Pos)
        return obj

    def text(s):
        return s.decode(errors="replace") if s else ""

    message = Message.Message.GetRootAs(payload, 0)
    request_id, kind = message.RequestId(), message.BodyType()
    if kind == Body.Body.Evaluate:
        return _Message(request_id, kind, data=_bytes_field(body(Evaluate.Evaluate)._tab, 0))
    if kind == Body.Body.HostReply:
        reply = body(HostReply.HostReply)
        return _Message(request_id, kind, data=_bytes_field(reply._tab, 1), call_id=reply.CallId(),
                        error=text(reply.Error()))
    if kind == Body.Body.Error:
        error = body(Error.Error)
        return _Message(request_id, kind, error=text(error.Message()), code=error.Code())
    return _Message(request_id, kind)


class Worker:
    def __init__(self, fd=None):
        """Adopts `fd`, by default the one named by CORRAL_WORKER_FD, marks it close-on-exec and
        removes the variable from the environment, so child processes inherit neither."""
        if fd is None:
            value = os.environ.pop("CORRAL_WORKER_FD", None)
            if value is None:
                raise ProtocolError("CORRAL_WORKER_FD is not set: this program is a corral worker, "
                                    "started by the supervisor")
            fd = int(value)
        os.set_inheritable(fd, False)
        self._fd = fd
        self._eval_id = None      # the evaluation in progress
        self._next_call_id = 1
        self._pending = set()     # host calls sent, not answered yet
        self._answers = {}        # call_id -> (data, error) answered, not waited for yet
        self._broken = None       # why the channel is unusable
        self._eof = False         # ...and it is because the supervisor left

    # --- frames ---------------------------------------------------------------------------

    def _read_exact(self, n):
        chunks, got = [], 0
        while got < n:
            chunk = os.read(self._fd, min(n - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _recv(self):
        """The next message, or None on EOF between frames. Raises ProtocolError."""
        try:
            header = self._read_exact(_HEADER.size)
            if not header:
                return None
            if len(header) < _HEADER.size:
                raise ProtocolError("the supervisor closed the channel inside a frame header")
            (n,) = _HEADER.unpack(header)
            if n > MAX_FRAME:  # before reading (or allocating) the payload
                raise ProtocolError("frame of %d bytes is over the %d-byte limit" % (n, MAX_FRAME))
            payload = self._read_exact(n)
        except OSError as e:
            raise ProtocolError("read from the supervisor failed: %s" % e) from None
        if len(payload) < n:
            raise ProtocolError("the supervisor closed the channel inside a frame")
        if n < 8 or payload[4:8] != _IDENTIFIER:
            raise ProtocolError("frame without the %r identifier" % _IDENTIFIER.decode())
        try:
            return _decode(payload)
        except ProtocolError:
            raise
        except Exception as e:  # struct.error, IndexError, ...: bytes that are no Message
            raise ProtocolError("malformed frame: %s" % e) from None

    def _send(self, request_id, body_type, build_body, size_hint):
        """Sends one Message; False (nothing sent) if it would be over MAX_FRAME."""
        builder = flatbuffers.Builder(size_hint + 64)
        body = build_body(builder)
        Message.Start(builder)
        Message.AddRequestId(builder, request_id)
        Message.AddBodyType(builder, body_type)
        Message.AddBody(builder, body)
        # Not FinishSizePrefixed: that aligns the buffer from the prefix, and the supervisor's
        # Verifier checks alignment from the payload's first byte.
        builder.Finish(Message.End(builder), _IDENTIFIER)
        payload = builder.Output()
        if len(payload) > MAX_FRAME:
            return False
        view = memoryview(_HEADER.pack(len(payload)) + payload)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as e:  # BrokenPipeError: the supervisor is gone
            raise ProtocolError("write to the supervisor failed: %s" % e) from None
        return True

    def _send_eval_reply(self, request_id, data):
        def body(b):
            vector = b.CreateByteVector(data)
            EvalReply.Start(b)
            EvalReply.AddData(b, vector)
            return EvalReply.End(b)
        return self._send(request_id, Body.Body.EvalReply, body, len(data))

    def _send_host_call(self, request_id, call_id, data):
        def body(b):
            vector = b.CreateByteVector(data)
            HostCall.Start(b)
            HostCall.AddCallId(b, call_id)
            HostCall.AddData(b, vector)
            return HostCall.End(b)
        return self._send(request_id, Body.Body.HostCall, body, len(data))

    def _fail(self, why, eof=False):
        if self._broken is None:
            self._broken, self._eof = why, eof

    # --- serving --------------------------------------------------------------------------

    def serve(self, handler):
        """Answers evaluations with handler(request: bytes) -> bytes until the supervisor closes
        the fd (returns None) or the channel breaks (raises ProtocolError). Every Evaluate gets
        one EvalReply: if the handler raises, the reply is "corral worker error: " + the
        traceback; a reply over the frame limit is replaced by an error text."""
        while self._broken is None:
            message = self._recv()
            if message is None:
                return
            if message.kind == Body.Body.Evaluate:
                self._eval_id = message.request_id
                self._pending.clear()
                self._answers.clear()
                try:
                    reply = _as_bytes(handler(message.data))
                except BaseException:  # even SystemExit: the worker never goes silent
                    reply = ("corral worker error: " + traceback.format_exc()).encode()
                self._eval_id = None
                if self._broken is not None:
                    break  # nobody to reply to
                if not self._send_eval_reply(message.request_id, reply):
                    self._send_eval_reply(message.request_id, b"corral worker error: the reply of "
                                          b"%d bytes is over the frame limit" % len(reply))
            elif message.kind == Body.Body.Error:
                raise ProtocolError("the supervisor reported a protocol error (code %d): %s"
                                    % (message.code, message.error))
            elif message.kind == Body.Body.HostReply:
                _log("ignored a HostReply outside any evaluation (request %d)" % message.request_id)
            else:
                raise ProtocolError("unexpected message (body type %d) from the supervisor"
                                    % message.kind)
        if not self._eof:
            raise ProtocolError(self._broken)

    # --- host calls (inside the handler) --------------------------------------------------

    def start_host_call(self, data):
        """Sends one host call and returns its call id, without waiting (several may be in
        flight); collect the reply with wait_host_call(call_id)."""
        if self._eval_id is None:
            raise HostCallError("host calls are only possible while an evaluation runs")
        if self._broken is not None:
            raise HostCallError(self._broken)
        data = _as_bytes(data)
        call_id = self._next_call_id
        self._next_call_id += 1
        try:
            sent = self._send_host_call(self._eval_id, call_id, data)
        except ProtocolError as e:
            self._fail(str(e))
            raise HostCallError(str(e)) from None
        if not sent:
            raise HostCallError("host call of %d bytes is over the frame limit" % len(data))
        self._pending.add(call_id)
        return call_id

    def wait_host_call(self, call_id):
        """The reply to host call `call_id` (bytes). Raises HostCallError(message) when the host
        answered with an error or the channel is gone."""
        if call_id not in self._pending and call_id not in self._answers:
            raise HostCallError("no host call %r is in flight" % (call_id,))
        while call_id not in self._answers and self._broken is None:
            try:
                message = self._recv()
            except ProtocolError as e:
                self._fail(str(e))
                break
            if message is None:
                self._fail("the supervisor closed the channel", eof=True)
                break
            if message.kind == Body.Body.HostReply:
                if message.request_id != self._eval_id or message.call_id not in self._pending:
                    _log("ignored a HostReply for call %d of request %d: not in flight"
                         % (message.call_id, message.request_id))
                    continue
                self._pending.discard(message.call_id)
                self._answers[message.call_id] = (message.data, message.error)
            elif message.kind == Body.Body.Error:
                self._fail("the supervisor reported a protocol error (code %d): %s"
                           % (message.code, message.error))
            else:
                self._fail("unexpected message (body type %d) from the supervisor during an "
                           "evaluation" % message.kind)
        if call_id not in self._answers:
            raise HostCallError(self._broken)
        data, error = self._answers.pop(call_id)
        if error:
            raise HostCallError(error)
        return data

    def host_call(self, data):
        """Sends `data` (bytes) to the host and returns its reply (bytes). Raises
        HostCallError(message) when the host answered with an error or the channel is gone."""
        return self.wait_host_call(self.start_host_call(data))

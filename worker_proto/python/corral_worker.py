"""The worker side of a corral worker channel (docs/protocol.md "Between the supervisor and a worker"), in Python.

The C++ twin is worker_proto/worker_sdk.h. Needs the stdlib, _corral_frames.py (next to this
file: the frames, encoded and decoded by hand) and the generated package corral.proto (built into
build/share/corral/python by the target corral_python_proto; put that directory on sys.path),
for the union's numbers only: the flatbuffers runtime is not imported.

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

import _corral_frames as _frames
from _corral_frames import ProtocolError  # corral_worker.ProtocolError, as it always was

MAX_FRAME = 64 << 20  # frames over this are refused, both ways
_HEADER = struct.Struct("<I")
_EVALUATE, _HOST_REPLY, _ERROR = _frames.EVALUATE, _frames.HOST_REPLY, _frames.ERROR


class HostCallError(Exception):
    """A host call failed: the host answered with an error, or the channel is gone."""


def _log(line):
    # sys.__stderr__: a handler may have redirected sys.stderr (the eval worker does).
    print("corral worker: " + line, file=sys.__stderr__, flush=True)


def _as_bytes(data):
    """bytes from bytes-like data, or from str as UTF-8; TypeError for anything else."""
    return data.encode() if isinstance(data, str) else memoryview(data).tobytes()


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
        return _frames.decode(payload)  # the identifier, then every offset it reads

    def _send(self, frame):
        """Writes one frame from _corral_frames; False (nothing sent) if it is over MAX_FRAME.
        Its payload is aligned from its own first byte, not from the length prefix: the
        supervisor's Verifier checks alignment from the payload's first byte."""
        if len(frame) - _HEADER.size > MAX_FRAME:
            return False
        view = memoryview(frame)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as e:  # BrokenPipeError: the supervisor is gone
            raise ProtocolError("write to the supervisor failed: %s" % e) from None
        return True

    def _send_eval_reply(self, request_id, data):
        if len(data) > MAX_FRAME:  # over the limit whatever the rest: not copied into a frame
            return False
        return self._send(_frames.eval_reply_frame(request_id, data))

    def _send_host_call(self, request_id, call_id, data):
        if len(data) > MAX_FRAME:
            return False
        return self._send(_frames.host_call_frame(request_id, call_id, data))

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
            if message.kind == _EVALUATE:
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
            elif message.kind == _ERROR:
                raise ProtocolError("the supervisor reported a protocol error (code %d): %s"
                                    % (message.code, message.error))
            elif message.kind == _HOST_REPLY:
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
            if message.kind == _HOST_REPLY:
                if message.request_id != self._eval_id or message.call_id not in self._pending:
                    _log("ignored a HostReply for call %d of request %d: not in flight"
                         % (message.call_id, message.request_id))
                    continue
                self._pending.discard(message.call_id)
                self._answers[message.call_id] = (message.data, message.error)
            elif message.kind == _ERROR:
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

"""The worker channel's frames, encoded and decoded by hand with struct: no flatbuffers runtime.

Used by corral_worker.py (docs/protocol.md "Between the supervisor and a worker"). The pure-Python
FlatBuffers runtime (Debian's python3-flatbuffers 2.0.8) cost about half of a small evaluation's
time in the worker; these functions do the same work with one struct call per frame out and a
handful per frame in. Only the union's numbers come from the generated package corral.proto
(corral/proto/Body.py imports nothing).

Out: eval_reply_frame() and host_call_frame() return a whole frame (u32 little-endian length,
then the payload) whose payload is, byte for byte, what flatbuffers.Builder made of the same
message in corral_worker.py (tests/python_worker_frames_test.py keeps that code and compares).

In: decode() reads Evaluate, HostReply and Error in full and any other body as its type only.
It checks what it reads as the supervisor's FlatBuffers Verifier does (bounds, alignment from
the payload's first byte, non-zero offsets, vtables inside the payload, NUL-terminated strings)
and raises ProtocolError for anything else, never reading past the payload.
"""

import struct

from corral.proto.Body import Body

IDENTIFIER = b"CRL1"

EVALUATE = Body.Evaluate
EVAL_REPLY = Body.EvalReply
HOST_CALL = Body.HostCall
HOST_REPLY = Body.HostReply
ERROR = Body.Error


class ProtocolError(Exception):
    """The channel is unusable: bad frame, I/O error, or an Error frame from the supervisor."""


# --- out ----------------------------------------------------------------------------------------
#
# flatbuffers.Builder writes from the buffer's end towards its start. For these messages it writes
# the body's byte vector (padded to 4), the body's table and vtable, Message's table and vtable,
# and then Finish pads so that the whole buffer is a multiple of its largest alignment (8 when it
# holds a u64, else 4) and prepends the identifier and the root offset. A u64 field equal to its
# default (0) is left out. So every offset below depends only on which u64 fields are non-zero and
# on the vector's length modulo 8, and every u64 is 8-aligned from the payload's first byte (the
# supervisor's Verifier checks that). Offsets from the payload's first byte:
#
#    0  u32 20: the root, Message's table
#    4  "CRL1"
#    8  2 bytes of padding
#   10  Message's vtable: u16 10 (its size), u16 its table's size, the offsets in the table of
#       request_id (0: absent), body_type and body (u16 each)
#   20  Message's table: i32 10 (back to the vtable), u32 the offset from here to the body's
#       table, padding, u8 body_type, and with a request_id: u64 request_id at 32, padding
#   ..  the body's vtable: u16 its size, u16 its table's size, a u16 offset per field
#   ..  the body's table: i32 back to its vtable, then its fields (HostCall: u32 to the data,
#       padding, u64 call_id, padding)
#   ..  u32 the data's length, the data, padding to a multiple of 4
#
# The layouts differ in their u64 fields and in padding: 3 bytes before body_type (1 before an
# EvalReply's without a request_id), and after a u64, whatever puts the data's end at the
# payload's end with every u64 still 8-aligned: q = _q(len(data)) after HostCall's call_id or,
# without one, after Message's request_id; 2 + q after an EvalReply's request_id.

_PAD = (b"", b"\0", b"\0\0", b"\0\0\0")


def _head(message_fields, body):
    """Everything in front of the data: the frame's length prefix, root offset, identifier,
    padding, Message's vtable and table start, then `message_fields`, the body (vtable and table)
    and the vector's length."""
    return struct.Struct("<II4s2x5HiI" + message_fields + body + "I")


# The heads by layout, each pair indexed by q // 4.
# EvalReply's vtable {6, 8, data at 4}, its table {i32 6, u32 4}.
_EVAL_REPLY_WITH_ID = (_head("3xBQ2x", "3HiI"), _head("3xBQ6x", "3HiI"))
_EVAL_REPLY = _head("xB", "3HiI")
# HostCall's vtable {8, table size, call_id, data} (call_id at 0: absent), its table
# {i32 8, u32 to the data, u64 call_id, padding}.
_HOST_CALL_WITH_IDS = (_head("3xBQ", "4HiIQ"), _head("3xBQ", "4HiIQ4x"))
_HOST_CALL_WITH_REQUEST_ID = (_head("3xBQ", "4HiI"), _head("3xBQ4x", "4HiI"))
_HOST_CALL_WITH_CALL_ID = (_head("3xB", "4HiIQ"), _head("3xB", "4HiIQ4x"))
_HOST_CALL = _head("3xB", "4HiI")


def _q(n):
    """0 or 4: how far a vector of n bytes (its u32 length, its data, its padding to 4) is from a
    multiple of 8."""
    return 0 if (n + 3) & 4 else 4


def eval_reply_frame(request_id, data):
    """The frame (length prefix and payload) of Message{request_id, EvalReply{data}}, `data`
    being bytes. Raises struct.error for a request_id outside u64."""
    n = len(data)
    pad = -n & 3
    if request_id:
        q = _q(n)
        head = _EVAL_REPLY_WITH_ID[q >> 2]
        prefix = head.pack(head.size - 4 + n + pad, 20, IDENTIFIER, 10, 22 + q, 12, 11, 4,
                           10, 24 + q, EVAL_REPLY, request_id, 6, 8, 4, 6, 4, n)
    else:
        head = _EVAL_REPLY
        prefix = head.pack(head.size - 4 + n + pad, 20, IDENTIFIER, 10, 10, 0, 9, 4,
                           10, 12, EVAL_REPLY, 6, 8, 4, 6, 4, n)
    return b"".join((prefix, data, _PAD[pad]))


def host_call_frame(request_id, call_id, data):
    """The frame (length prefix and payload) of Message{request_id, HostCall{call_id, data}},
    `data` being bytes. Raises struct.error for an id outside u64."""
    n = len(data)
    pad = -n & 3
    q = _q(n)
    if request_id and call_id:
        head = _HOST_CALL_WITH_IDS[q >> 2]
        prefix = head.pack(head.size - 4 + n + pad, 20, IDENTIFIER, 10, 20, 12, 11, 4,
                           10, 24, HOST_CALL, request_id, 8, 16 + q, 8, 4, 8, 12 + q, call_id, n)
    elif request_id:
        head = _HOST_CALL_WITH_REQUEST_ID[q >> 2]
        prefix = head.pack(head.size - 4 + n + pad, 20, IDENTIFIER, 10, 20 + q, 12, 11, 4,
                           10, 24 + q, HOST_CALL, request_id, 8, 8, 0, 4, 8, 4, n)
    elif call_id:
        head = _HOST_CALL_WITH_CALL_ID[q >> 2]
        prefix = head.pack(head.size - 4 + n + pad, 20, IDENTIFIER, 10, 12, 0, 11, 4,
                           10, 16, HOST_CALL, 8, 16 + q, 8, 4, 8, 12 + q, call_id, n)
    else:
        head = _HOST_CALL
        prefix = head.pack(head.size - 4 + n + pad, 20, IDENTIFIER, 10, 12, 0, 11, 4,
                           10, 16, HOST_CALL, 8, 8, 0, 4, 8, 4, n)
    return b"".join((prefix, data, _PAD[pad]))


# --- in -----------------------------------------------------------------------------------------

_U8 = struct.Struct("<B").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from

_NAMES = {EVALUATE: "Evaluate", HOST_REPLY: "HostReply", ERROR: "Error"}


class Inbound:
    """One decoded inbound message: only the fields the worker side reads. Absent fields are
    their defaults (0, b"", "")."""

    __slots__ = ("request_id", "kind", "data", "call_id", "error", "code")

    def __init__(self, request_id, kind, data=b"", call_id=0, error="", code=0):
        self.request_id, self.kind, self.data = request_id, kind, data
        self.call_id, self.error, self.code = call_id, error, code


def _malformed(why):
    return ProtocolError("malformed frame: " + why)


class _Table:
    """A table in a payload, its vtable checked to lie inside it (VerifyTableStart)."""

    __slots__ = ("buf", "pos", "vtable", "vtable_size", "name")

    def __init__(self, buf, pos, name):
        size = len(buf)
        if pos & 3 or pos + 4 > size:
            raise _malformed("the %s table is misaligned or past the end" % name)
        vtable = pos - _I32(buf, pos)[0]
        if vtable < 0 or vtable & 1 or vtable + 2 > size:
            raise _malformed("the %s table's vtable offset points outside the frame" % name)
        vtable_size = _U16(buf, vtable)[0]
        if vtable_size & 1 or vtable + vtable_size > size:
            raise _malformed("the %s table's vtable runs past the end" % name)
        self.buf, self.pos, self.name = buf, pos, name
        self.vtable, self.vtable_size = vtable, vtable_size

    def _at(self, field_id, width, what):
        """The payload offset of field `field_id` (`width` bytes, aligned to them), 0 if absent."""
        slot = 4 + 2 * field_id  # ids never change (schema evolution rules): so neither do slots
        if slot >= self.vtable_size:
            return 0
        offset = _U16(self.buf, self.vtable + slot)[0]
        if not offset:
            return 0
        at = self.pos + offset
        if at % width or at + width > len(self.buf):
            raise _malformed("%s.%s is misaligned or past the end" % (self.name, what))
        return at

    def scalar(self, field_id, unpack, width, what):
        at = self._at(field_id, width, what)
        return unpack(self.buf, at)[0] if at else 0

    def _target(self, at, what):
        """Where the u32 offset at `at` points (VerifyOffset): forward, non-zero, inside."""
        offset = _U32(self.buf, at)[0]
        target = at + offset
        if not offset or offset >= 1 << 31 or target >= len(self.buf):
            raise _malformed("%s.%s points outside the frame" % (self.name, what))
        return target

    def table(self, field_id, name, what):
        """The table field `field_id` as a _Table, None if absent."""
        at = self._at(field_id, 4, what)
        return _Table(self.buf, self._target(at, what), name) if at else None

    def vector(self, field_id, what, string=False):
        """The [ubyte] (or, with `string`, string) field `field_id` as bytes, b"" if absent."""
        at = self._at(field_id, 4, what)
        if not at:
            return b""
        buf = self.buf
        start = self._target(at, what)
        if start & 3 or start + 4 > len(buf):
            raise _malformed("%s.%s is misaligned or past the end" % (self.name, what))
        end = start + 4 + _U32(buf, start)[0]
        if end + string > len(buf):
            raise _malformed("%s.%s runs past the end of the frame" % (self.name, what))
        if string and buf[end]:
            raise _malformed("%s.%s has no NUL terminator" % (self.name, what))
        return bytes(buf[start + 4:end])


def _text(b):
    return b.decode(errors="replace") if b else ""


def decode(payload):
    """The Inbound held by one frame's payload (bytes-like, without the length prefix). Raises
    ProtocolError for a payload without the identifier and for any bytes that are no Message
    (or whose Evaluate, HostReply or Error body is no such table)."""
    if len(payload) < 8 or payload[4:8] != IDENTIFIER:
        raise ProtocolError("frame without the %r identifier" % IDENTIFIER.decode())
    root = _U32(payload, 0)[0]
    if not root or root >= len(payload):
        raise _malformed("the root offset points outside the frame")
    message = _Table(payload, root, "Message")
    request_id = message.scalar(0, _U64, 8, "request_id")
    kind = message.scalar(1, _U8, 1, "body_type")
    name = _NAMES.get(kind)
    if name is None:
        return Inbound(request_id, kind)  # the worker reads no other body
    body = message.table(2, name, "body")
    if body is None:
        raise _malformed("the %s message has no body" % name)
    if kind == EVALUATE:
        return Inbound(request_id, kind, data=body.vector(0, "data"))
    if kind == HOST_REPLY:
        return Inbound(request_id, kind, call_id=body.scalar(0, _U64, 8, "call_id"),
                       data=body.vector(1, "data"), error=_text(body.vector(2, "error", True)))
    return Inbound(request_id, kind, code=body.scalar(0, _U16, 2, "code"),
                   error=_text(body.vector(1, "message", True)))

"""worker_proto/python/_corral_frames.py against the generated FlatBuffers code.

Out: the hand encoders must give, byte for byte, the frames that flatbuffers.Builder and the
generated package corral.proto give (the code below is what corral_worker.py ran before them).
In: the hand decoder must read every Evaluate, HostReply and Error the generated builder can
lay out (in the Python builder's field order and in the C++ Create* functions' order) and the
C++-built frames of the fuzz corpus (tests/fuzz/corpus), exactly as the generated reader does,
and must refuse every malformed payload with ProtocolError, never misreading.
That the supervisor's C++ Verifier accepts the hand-encoded frames is exercised by the suites
that run the Python worker behind a real supervisor (worker_sdk_test, python_client_test).

Run by /usr/bin/python3 -m pytest (Debian's python3-pytest and python3-flatbuffers), with
CORRAL_PYTHON_DIR naming the directory holding the generated package (tests/CMakeLists.txt).
"""

import os
import random
import socket
import struct
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PROTO = os.environ.get("CORRAL_PYTHON_DIR",
                       os.path.join(SOURCE, "build", "share", "corral", "python"))
sys.path[0:0] = [os.path.join(SOURCE, "worker_proto", "python"), PROTO]

import flatbuffers  # noqa: E402
from corral.proto import (Body, Error, EvalReply, Evaluate, HostCall, HostReply,  # noqa: E402
                          Message)

import _corral_frames as frames  # noqa: E402
import corral_worker  # noqa: E402
from _corral_frames import ProtocolError  # noqa: E402

SIZES = (0, 1, 3, 4, 7, 8, 1000, 65537)
IDS = (0, 1, 2**32, 2**64 - 1)
CORPUS = os.path.join(HERE, "fuzz", "corpus")


def payload_bytes(n):
    """n bytes that are not all alike, so that a shifted copy cannot pass for the original."""
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def utf8(text):
    """CreateString's argument: bytes, since the 2.0.8 builder sizes a str by its characters."""
    return text.encode() if isinstance(text, str) else text


# --- the generated code: builders ---------------------------------------------------------------

def finish(builder, request_id, body_type, body, cpp_order=False):
    """Message{request_id, body} as corral_worker.py built it (cpp_order: in the order of the C++
    CreateMessage, largest field first)."""
    Message.Start(builder)
    if cpp_order:
        Message.AddRequestId(builder, request_id)
        Message.AddBody(builder, body)
        Message.AddBodyType(builder, body_type)
    else:
        Message.AddRequestId(builder, request_id)
        Message.AddBodyType(builder, body_type)
        Message.AddBody(builder, body)
    builder.Finish(Message.End(builder), b"CRL1")
    return bytes(builder.Output())


def generated_eval_reply(request_id, data):
    """corral_worker.py's _send_eval_reply before _corral_frames, as it was."""
    b = flatbuffers.Builder(len(data) + 64)
    vector = b.CreateByteVector(data)
    EvalReply.Start(b)
    EvalReply.AddData(b, vector)
    return finish(b, request_id, Body.Body.EvalReply, EvalReply.End(b))


def generated_host_call(request_id, call_id, data):
    """corral_worker.py's _send_host_call before _corral_frames, as it was."""
    b = flatbuffers.Builder(len(data) + 64)
    vector = b.CreateByteVector(data)
    HostCall.Start(b)
    HostCall.AddCallId(b, call_id)
    HostCall.AddData(b, vector)
    return finish(b, request_id, Body.Body.HostCall, HostCall.End(b))


def generated_evaluate(request_id, data, cpp_order=False, with_data=True):
    b = flatbuffers.Builder(len(data) + 64)
    vector = b.CreateByteVector(data) if with_data else 0
    Evaluate.Start(b)
    if with_data:
        Evaluate.AddData(b, vector)
    return finish(b, request_id, Body.Body.Evaluate, Evaluate.End(b), cpp_order)


def generated_host_reply(request_id, call_id, data, error=None, cpp_order=False):
    b = flatbuffers.Builder(len(data) + 64)
    if cpp_order:  # CreateHostReply: the strings were made by the caller, error last
        vector = b.CreateByteVector(data)
        text = b.CreateString(utf8(error)) if error is not None else 0
    else:
        text = b.CreateString(utf8(error)) if error is not None else 0
        vector = b.CreateByteVector(data)
    HostReply.Start(b)
    HostReply.AddCallId(b, call_id)
    if cpp_order:
        if text:
            HostReply.AddError(b, text)
        HostReply.AddData(b, vector)
    else:
        HostReply.AddData(b, vector)
        if text:
            HostReply.AddError(b, text)
    return finish(b, request_id, Body.Body.HostReply, HostReply.End(b), cpp_order)


def generated_error(request_id, code, message, cpp_order=False):
    b = flatbuffers.Builder(64)
    text = b.CreateString(utf8(message)) if message is not None else 0
    Error.Start(b)
    if cpp_order:
        if text:
            Error.AddMessage(b, text)
        Error.AddCode(b, code)
    else:
        Error.AddCode(b, code)
        if text:
            Error.AddMessage(b, text)
    return finish(b, request_id, Body.Body.Error, Error.End(b), cpp_order)


# --- the generated code: reader -----------------------------------------------------------------

def generated_read(payload):
    """(request_id, kind, data, call_id, error, code) as the generated reader sees them, with the
    hand decoder's defaults for absent fields and its reading of text (UTF-8, replaced)."""
    message = Message.Message.GetRootAs(payload, 0)
    request_id, kind = message.RequestId(), message.BodyType()

    def body(cls):
        obj, table = cls(), message.Body()
        obj.Init(table.Bytes, table.Pos)
        return obj

    def vector(obj, field_id):
        o = obj._tab.Offset(4 + 2 * field_id)
        if not o:
            return b""
        start = obj._tab.Vector(o)
        return bytes(obj._tab.Bytes[start:start + obj._tab.VectorLen(o)])

    def text(s):
        return s.decode(errors="replace") if s else ""

    if kind == Body.Body.Evaluate:
        return request_id, kind, vector(body(Evaluate.Evaluate), 0), 0, "", 0
    if kind == Body.Body.HostReply:
        r = body(HostReply.HostReply)
        return request_id, kind, vector(r, 1), r.CallId(), text(r.Error()), 0
    if kind == Body.Body.Error:
        e = body(Error.Error)
        return request_id, kind, b"", 0, text(e.Message()), e.Code()
    if kind == Body.Body.EvalReply:
        return request_id, kind, vector(body(EvalReply.EvalReply), 0), 0, "", 0
    if kind == Body.Body.HostCall:
        c = body(HostCall.HostCall)
        return request_id, kind, vector(c, 1), c.CallId(), "", 0
    return request_id, kind, b"", 0, "", 0


def fields(m):
    return m.request_id, m.kind, m.data, m.call_id, m.error, m.code


def corpus_payload(name):
    with open(os.path.join(CORPUS, name), "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<I", raw)
    assert len(raw) == 4 + n
    return raw[4:]


# --- out: byte for byte -------------------------------------------------------------------------

@pytest.mark.parametrize("request_id", IDS)
@pytest.mark.parametrize("n", SIZES)
def test_eval_reply_is_the_builders_byte_for_byte(n, request_id):
    data = payload_bytes(n)
    expected = generated_eval_reply(request_id, data)
    frame = frames.eval_reply_frame(request_id, data)
    assert frame[:4] == struct.pack("<I", len(expected))
    assert frame[4:] == expected
    assert generated_read(frame[4:]) == (request_id, Body.Body.EvalReply, data, 0, "", 0)


@pytest.mark.parametrize("call_id", IDS)
@pytest.mark.parametrize("request_id", IDS)
@pytest.mark.parametrize("n", SIZES)
def test_host_call_is_the_builders_byte_for_byte(n, request_id, call_id):
    data = payload_bytes(n)
    expected = generated_host_call(request_id, call_id, data)
    frame = frames.host_call_frame(request_id, call_id, data)
    assert frame[:4] == struct.pack("<I", len(expected))
    assert frame[4:] == expected
    assert generated_read(frame[4:]) == (request_id, Body.Body.HostCall, data, call_id, "", 0)


def test_every_length_modulo_8_and_every_u64_8_aligned():
    # The layouts change with the vector's length modulo 8: all of them, for both kinds.
    for n in range(0, 24):
        data = payload_bytes(n)
        for request_id in (0, 5):
            frame = frames.eval_reply_frame(request_id, data)
            assert frame[4:] == generated_eval_reply(request_id, data)
            if request_id:
                assert len(frame[4:]) % 8 == 0 and frame[4 + 32:4 + 40] == struct.pack("<Q", 5)
            for call_id in (0, 9):
                frame = frames.host_call_frame(request_id, call_id, data)
                assert frame[4:] == generated_host_call(request_id, call_id, data)
                payload = frame[4:]
                assert len(payload) % (8 if request_id or call_id else 4) == 0
                if call_id:  # where the generated reader finds it, 8-aligned from byte 0
                    c = HostCall.HostCall()
                    m = Message.Message.GetRootAs(payload, 0)
                    c.Init(payload, m.Body().Pos)
                    at = c._tab.Pos + c._tab.Offset(4)
                    assert at % 8 == 0 and struct.unpack_from("<Q", payload, at)[0] == 9


def test_the_hand_decoder_reads_outbound_kinds_as_their_type_only():
    m = frames.decode(frames.eval_reply_frame(2**64 - 1, b"x")[4:])
    assert fields(m) == (2**64 - 1, Body.Body.EvalReply, b"", 0, "", 0)
    m = frames.decode(frames.host_call_frame(3, 4, b"x")[4:])
    assert fields(m) == (3, Body.Body.HostCall, b"", 0, "", 0)


def test_union_numbers_are_the_schemas():
    ours = (frames.EVALUATE, frames.EVAL_REPLY, frames.HOST_CALL, frames.HOST_REPLY, frames.ERROR)
    assert ours == (Body.Body.Evaluate, Body.Body.EvalReply, Body.Body.HostCall,
                    Body.Body.HostReply, Body.Body.Error)
    assert corral_worker.ProtocolError is ProtocolError


# --- in: everything the generated encoders and the C++ encoders produce ------------------------

@pytest.mark.parametrize("cpp_order", (False, True))
@pytest.mark.parametrize("request_id", IDS)
@pytest.mark.parametrize("n", SIZES)
def test_decode_reads_what_the_generated_builder_writes(n, request_id, cpp_order):
    data = payload_bytes(n)
    cases = [
        (generated_evaluate(request_id, data, cpp_order),
         (request_id, Body.Body.Evaluate, data, 0, "", 0)),
        (generated_evaluate(request_id, b"", cpp_order, with_data=False),
         (request_id, Body.Body.Evaluate, b"", 0, "", 0)),
    ]
    for call_id in IDS:
        for error in (None, "", "x", "h\u00e9 failed", "e" * (n % 13)):
            expected = (request_id, Body.Body.HostReply, data, call_id, error or "", 0)
            payload = generated_host_reply(request_id, call_id, data, error, cpp_order)
            cases.append((payload, expected))
    for code in (0, 1, 16, 65535):
        for text in (None, "", "bad worker", "\u00e9" * (n % 11)):
            cases.append((generated_error(request_id, code, text, cpp_order),
                          (request_id, Body.Body.Error, b"", 0, text or "", code)))
    for payload, expected in cases:
        assert generated_read(payload) == expected
        assert fields(frames.decode(payload)) == expected
        assert fields(frames.decode(bytearray(payload))) == expected
        assert fields(frames.decode(memoryview(payload))) == expected


def test_decode_reads_the_cpp_built_frames_of_the_fuzz_corpus():
    expected = {
        "evaluate": (1, Body.Body.Evaluate, b"{\"code\": \"1 + host('x')\"}", 0, "", 0),
        "host_reply": (26, Body.Body.HostReply, b"41", 1, "host: x failed", 0),
        "error": (7, Body.Body.Error, b"", 0, "request id 7 is already in flight", 4),
        # Bodies the worker does not read: their type only, as before.
        "eval_reply": (1, Body.Body.EvalReply, b"", 0, "", 0),
        "host_call": (26, Body.Body.HostCall, b"", 0, "", 0),
        "no_body": (9, 0, b"", 0, "", 0),
        "unknown_body_type": (13, 42, b"", 0, "", 0),
        "body_type_mismatch": (14, Body.Body.ExecRequest, b"", 0, "", 0),
    }
    for name, want in expected.items():
        payload = corpus_payload(name)
        assert fields(frames.decode(payload)) == want, name
        if name in ("evaluate", "host_reply", "error"):
            assert generated_read(payload) == want, name


def test_non_utf8_text_is_replaced_as_before():
    payload = generated_host_reply(1, 2, b"d", b"bad \xff")
    assert frames.decode(payload).error == "bad \ufffd"


# --- in: hostile bytes --------------------------------------------------------------------------

def refused(payload, match="malformed frame"):
    with pytest.raises(ProtocolError, match=match):
        frames.decode(payload)


def layout(payload):
    """Offsets in a valid payload: Message's table and vtable, the body's table and vtable."""
    root = struct.unpack_from("<I", payload, 0)[0]
    vtable = root - struct.unpack_from("<i", payload, root)[0]
    body_field = root + struct.unpack_from("<H", payload, vtable + 8)[0]
    body = body_field + struct.unpack_from("<I", payload, body_field)[0]
    body_vtable = body - struct.unpack_from("<i", payload, body)[0]
    return root, vtable, body_field, body, body_vtable


def field_at(payload, table, vtable, field_id):
    return table + struct.unpack_from("<H", payload, vtable + 4 + 2 * field_id)[0]


def patched(payload, at, fmt, value):
    b = bytearray(payload)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def test_wrong_identifier_and_short_payloads():
    good = generated_evaluate(1, b"abc")
    for payload in (b"", b"\x08\0\0\0", good[:7], b"\x08\0\0\0XXXX", good[:4] + b"CRL2" + good[8:],
                    corpus_payload("wrong_identifier"), corpus_payload("garbage")):
        refused(payload, "identifier")


def test_truncated_frames_are_refused_unless_only_padding_went():
    for payload in (generated_evaluate(2**64 - 1, payload_bytes(13)),
                    generated_host_reply(3, 2**32, payload_bytes(7), "oops", cpp_order=True),
                    generated_error(4, 9, "no"),
                    corpus_payload("evaluate"), corpus_payload("host_reply"),
                    corpus_payload("error")):
        whole = fields(frames.decode(payload))
        cut = 0
        for k in range(len(payload)):
            try:
                got = fields(frames.decode(payload[:k]))
            except ProtocolError:
                cut += 1
                continue
            assert got == whole and payload[k:] == bytes(len(payload) - k)  # zeros after the end
        assert cut >= len(payload) - 3


def test_bad_root_offsets():
    good = generated_evaluate(1, b"abc")
    refused(patched(good, 0, "<I", 0), "root")
    refused(patched(good, 0, "<I", len(good)), "root")
    refused(patched(good, 0, "<I", 0xFFFFFFFF), "root")
    refused(patched(good, 0, "<I", 2))                  # misaligned
    refused(corpus_payload("bad_root_offset"), "root")


def test_bad_vtable_offsets():
    for good in (generated_evaluate(1, b"abc"), generated_host_reply(1, 2, b"d", "e"),
                 generated_error(1, 3, "m"), corpus_payload("host_reply")):
        root, vtable, body_field, body, body_vtable = layout(good)
        for table in (root, body):
            for soffset in (table + 1, table + 2, -len(good), -(2**31), 2**31 - 1):
                refused(patched(good, table, "<i", soffset), "vtable")
        for vt in (vtable, body_vtable):
            refused(patched(good, vt, "<H", len(good)), "vtable")    # runs past the end
            refused(patched(good, vt, "<H", 7), "vtable")            # odd
        # A field's offset in the vtable pointing past the end.
        refused(patched(good, vtable + 4, "<H", len(good)), "request_id")
        refused(patched(good, vtable + 8, "<H", len(good)), "body")
        refused(patched(good, body_vtable + 4, "<H", 0xFFFF))


def test_misaligned_scalars_and_offsets():
    good = generated_host_reply(2**64 - 1, 2**64 - 1, b"data", "err")
    root, vtable, body_field, body, body_vtable = layout(good)
    request_id = field_at(good, root, vtable, 0)
    refused(patched(good, vtable + 4, "<H", request_id - root + 4), "request_id")
    call_id = field_at(good, body, body_vtable, 0)
    refused(patched(good, body_vtable + 4, "<H", call_id - body + 4), "call_id")
    refused(patched(good, vtable + 8, "<H", body_field - root + 1), "body")
    data_field = field_at(good, body, body_vtable, 1)
    vector = data_field + struct.unpack_from("<I", good, data_field)[0]
    refused(patched(good, data_field, "<I", vector - data_field + 1), "data")


def test_offsets_that_are_zero_backwards_or_outside():
    good = generated_host_reply(1, 2, b"data", "err")
    root, vtable, body_field, body, body_vtable = layout(good)
    for value in (0, 2**31, 2**32 - 4, len(good)):
        refused(patched(good, body_field, "<I", value), "body")
    data_field = field_at(good, body, body_vtable, 1)
    for value in (0, 2**31, 2**32 - 4, len(good)):
        refused(patched(good, data_field, "<I", value), "data")


def test_vectors_and_strings_running_past_the_end():
    good = generated_host_reply(1, 2, payload_bytes(10), "error text")
    root, vtable, body_field, body, body_vtable = layout(good)
    for field_id, what in ((1, "data"), (2, "error")):
        at = field_at(good, body, body_vtable, field_id)
        vector = at + struct.unpack_from("<I", good, at)[0]
        room = len(good) - vector - 4  # bytes after the length
        for n in (room + 1, 2**31, 2**32 - 1):
            refused(patched(good, vector, "<I", n), what)
        if what == "data":  # exactly up to the end is fine: the padding is data then
            assert frames.decode(patched(good, vector, "<I", room)).data == good[vector + 4:]
        else:  # a string needs its NUL inside the frame
            refused(patched(good, vector, "<I", room), what)
    error = generated_error(1, 2, "message")
    root, vtable, body_field, body, body_vtable = layout(error)
    at = field_at(error, body, body_vtable, 1)
    vector = at + struct.unpack_from("<I", error, at)[0]
    n = struct.unpack_from("<I", error, vector)[0]
    refused(patched(error, vector + 4 + n, "<B", ord("x")), "NUL")


def test_a_body_type_without_a_body():
    for kind in (Body.Body.Evaluate, Body.Body.HostReply, Body.Body.Error):
        b = flatbuffers.Builder(64)
        Message.Start(b)
        Message.AddRequestId(b, 1)
        Message.AddBodyType(b, kind)
        b.Finish(Message.End(b), b"CRL1")
        refused(bytes(b.Output()), "no body")


def test_mutations_raise_protocol_error_or_read_as_the_generated_reader_does():
    """Random bytes overwritten in valid payloads: the decoder refuses the result with
    ProtocolError (nothing else escapes), or reads exactly what the generated reader reads there."""
    rng = random.Random(13)
    seeds = [generated_evaluate(1, b"abc"), generated_evaluate(2**64 - 1, payload_bytes(9), True),
             generated_host_reply(5, 6, b"xy", "err"),
             generated_host_reply(0, 2**40, b"", "", True),
             generated_error(7, 3, "msg"), generated_error(0, 0, None, True),
             corpus_payload("evaluate"), corpus_payload("host_reply"), corpus_payload("error")]
    accepted = refused_count = 0
    for _ in range(20000):
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(b))
            if rng.random() < 0.5:
                b[at] = rng.randrange(256)
            else:  # a plausible small offset or length, little-endian
                value = rng.choice((0, 1, 2, 4, 8, 0xFF, 0xFFFF, len(b), rng.randrange(64)))
                size = rng.choice((1, 2, 4))
                b[at:at + size] = (value & ((1 << 8 * size) - 1)).to_bytes(size, "little")
        payload = bytes(b[:rng.choice((len(b), len(b), rng.randrange(len(b) + 1)))])
        try:
            got = fields(frames.decode(payload))
        except ProtocolError:
            refused_count += 1
            continue
        accepted += 1
        if got[1] in (Body.Body.Evaluate, Body.Body.HostReply, Body.Body.Error):
            assert got == generated_read(payload), payload.hex()
    assert accepted > 1000 and refused_count > 1000


# --- the worker on a socketpair -----------------------------------------------------------------

def send(sock, payload):
    sock.sendall(struct.pack("<I", len(payload)) + payload)


def receive(sock):
    def exact(n):
        chunks = []
        while n:
            chunk = sock.recv(n)
            assert chunk, "the worker closed the channel"
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
    (n,) = struct.unpack("<I", exact(4))
    return generated_read(exact(n))


def run_worker(handler):
    """A Worker serving handler(worker) on a thread; our end of its socketpair, the thread and
    what serve() did (its return value or its exception), once the thread is done."""
    ours, theirs = socket.socketpair()
    ours.settimeout(20)  # a worker that stops answering fails the test instead of hanging it
    worker = corral_worker.Worker(theirs.detach())
    outcome = {}

    def serve():
        try:
            outcome["returned"] = worker.serve(handler(worker))
        except Exception as e:  # noqa: BLE001 - the test reads it
            outcome["raised"] = e
        finally:
            os.close(worker._fd)

    thread = threading.Thread(target=serve)
    thread.start()
    return ours, thread, outcome


def test_worker_evaluations_with_host_calls_through_the_hand_frames():
    big = payload_bytes(65537)

    def handler(worker):
        return lambda request: request + b"|" + worker.host_call(b"q:" + request[:3])

    ours, thread, outcome = run_worker(handler)
    with ours:
        for request_id, data in ((1, b"abc"), (2**64 - 1, big), (7, b"")):
            send(ours, generated_evaluate(request_id, data, cpp_order=True))
            rid, kind, call, call_id, _, _ = receive(ours)
            assert (rid, kind, call) == (request_id, Body.Body.HostCall, b"q:" + data[:3])
            send(ours, generated_host_reply(request_id, call_id, b"answer", cpp_order=True))
            assert receive(ours) == (request_id, Body.Body.EvalReply, data + b"|answer", 0, "", 0)
        # A host-call error comes back as the handler's exception text.
        send(ours, generated_evaluate(8, b"err"))
        rid, kind, _, call_id, _, _ = receive(ours)
        send(ours, generated_host_reply(8, call_id, b"", "refused"))
        rid, kind, reply, _, _, _ = receive(ours)
        assert kind == Body.Body.EvalReply and b"HostCallError: refused" in reply
    thread.join(10)
    assert outcome == {"returned": None}  # EOF between frames


def test_worker_refuses_a_malformed_frame():
    ours, thread, outcome = run_worker(lambda worker: lambda request: request)
    with ours:
        good = generated_evaluate(1, b"abc")
        root, vtable, *_ = layout(good)
        send(ours, patched(good, root, "<i", -len(good)))
        thread.join(10)
    assert isinstance(outcome.get("raised"), ProtocolError)
    assert "malformed frame" in str(outcome["raised"])

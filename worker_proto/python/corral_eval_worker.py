"""corral's shipped Python evaluation worker: a REPL-like namespace behind a worker channel.

Run by the supervisor (with the channel's fd in CORRAL_WORKER_FD) as

    /usr/bin/python3 -I -B -u /dev/fd/4 GENERATED_DIR SCRIPT_DIR

(the supervisor opens this script when it checks it and runs that very file as /dev/fd/4;
run by hand, `corral_eval_worker.py GENERATED_DIR` also works). GENERATED_DIR holds the
generated package corral.proto (build/share/corral/python); SCRIPT_DIR (default: this script's
own directory) holds corral_worker.py and _corral_frames.py. -I ignores PYTHONPATH and the user
site, so this script puts both on sys.path itself. The worker's frames are encoded by hand
(_corral_frames.py): the flatbuffers runtime is not imported.

Request: JSON {"code": "..."}. The code runs in one namespace kept across evaluations; when its
last statement is an expression, that value's repr() is the result (None gives null, as a REPL
prints nothing). Inside the code, host_call(b"...") -> bytes calls the host and raises
HostCallError(message) when the host answers with an error.
Reply: JSON {"ok": bool, "stdout": str, "stderr": str, "result": str|null, "error": str|null},
error being the traceback. What the code prints is captured for the reply (up to MAX_CAPTURE
characters per stream); the process's own stdout/stderr stay the worker's log.
"""

import ast
import builtins
import io
import json
import linecache
import os
import sys
import traceback

if len(sys.argv) not in (2, 3):
    sys.exit("usage: /usr/bin/python3 -I -B -u corral_eval_worker.py GENERATED_DIR [SCRIPT_DIR]")
sys.path[0:0] = [sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else os.path.dirname(os.path.abspath(__file__))]

try:
    import corral_worker
except ImportError as e:
    sys.exit("corral_eval_worker: %s (GENERATED_DIR must hold the generated package corral.proto, "
             "as build/share/corral/python does, and SCRIPT_DIR corral_worker.py)" % e)

MAX_CAPTURE = 1 << 20  # characters kept per captured stream, and of the result's repr


class _Capture(io.StringIO):
    """A StringIO keeping the first MAX_CAPTURE characters written to it."""

    def __init__(self):
        super().__init__()
        self.dropped = 0

    def write(self, s):
        room = max(0, MAX_CAPTURE - self.tell())
        if len(s) > room:
            self.dropped += len(s) - room
            super().write(s[:room])
        else:
            super().write(s)
        return len(s)

    def text(self):
        note = "\n[corral: %d more characters dropped]\n" % self.dropped if self.dropped else ""
        return self.getvalue() + note


def _clip(text):
    if text is None or len(text) <= MAX_CAPTURE:
        return text
    return text[:MAX_CAPTURE] + "\n[corral: %d more characters dropped]" % (len(text) - MAX_CAPTURE)


def _reply(ok, stdout="", stderr="", result=None, error=None):
    return json.dumps({"ok": ok, "stdout": stdout, "stderr": stderr, "result": _clip(result),
                       "error": _clip(error)}).encode()


def _traceback(exc, filename):
    """The traceback from the evaluated code's first frame on (the worker's frames cut)."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return "".join(traceback.format_exception_only(type(exc), exc))
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


class Evaluator:
    def __init__(self, worker):
        self.evaluations = 0
        self.namespace = {
            "__name__": "__main__",
            "__builtins__": builtins,
            "host_call": worker.host_call,
            "HostCallError": corral_worker.HostCallError,
        }

    def handle(self, request):
        try:
            code = json.loads(request).get("code")
        except (ValueError, AttributeError) as e:  # not JSON, not UTF-8, not an object
            return _reply(False, error='bad request: expected JSON {"code": "..."}: %s' % e)
        if not isinstance(code, str):
            return _reply(False, error='bad request: expected JSON {"code": "..."} with a string')
        self.evaluations += 1
        filename = "<corral-eval-%d>" % self.evaluations
        # Tracebacks show the source, also for functions called in later evaluations.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        out, err = _Capture(), _Capture()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        result = error = None
        try:
            result = self._run(code, filename)
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: the worker goes on
            error = _traceback(e, filename)
        finally:
            sys.stdout, sys.stderr = saved
        return _reply(error is None, out.text(), err.text(), result, error)

    def _run(self, code, filename):
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), self.namespace)
        if last is None:
            return None
        value = eval(compile(last, filename, "eval"), self.namespace)
        return None if value is None else repr(value)


def main():
    try:
        worker = corral_worker.Worker()
    except (corral_worker.ProtocolError, ValueError, OSError) as e:
        print("corral_eval_worker: %s" % e, file=sys.stderr)
        return 2
    print("corral_eval_worker: ready (python %s, pid %d)" % (sys.version.split()[0], os.getpid()),
          file=sys.stderr)
    try:
        worker.serve(Evaluator(worker).handle)
    except corral_worker.ProtocolError as e:
        print("corral_eval_worker: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

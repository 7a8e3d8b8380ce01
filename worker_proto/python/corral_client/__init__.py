"""corral_client: drive a corral supervisor from Python (README "Python client").

    import corral_client
    with corral_client.connect() as c:
        r = c.exec(["echo", "hi"], timeout=10)
        print(r.exit_code, r.stdout)

Client (blocking) and AsyncClient (asyncio) have the same methods. Needs Debian's
python3-flatbuffers (run with /usr/bin/python3) and the generated package corral.proto on
sys.path (build/share/corral/python, or the installed <prefix>/share/corral/python).
"""

from ._sync import Background, Client, ExecStream, Scope, Worker, connect
from ._async import AsyncBackground, AsyncClient, AsyncScope, AsyncWorker, connect_async
from ._wire import default_socket_path
from .errors import (Cancelled, CorralError, InvalidRequest, IsADirectory, NotFound, OutsideRoots,
                     PermissionDenied, ProtocolError, RefusedByPolicy, StateLost, SupervisorGone,
                     TimedOut, Unsupported)
from .results import (Caps, Chunk, DirEntry, EvalResult, ExecResult, FileWindow, Layer, PollResult,
                      Timings)

__all__ = [
    "AsyncBackground", "AsyncClient", "AsyncScope", "AsyncWorker", "Background", "Cancelled",
    "Caps", "Chunk", "Client", "CorralError", "DirEntry", "EvalResult", "ExecResult", "ExecStream",
    "FileWindow", "InvalidRequest", "IsADirectory", "Layer", "NotFound", "OutsideRoots",
    "PermissionDenied", "PollResult", "ProtocolError", "RefusedByPolicy", "Scope", "StateLost",
    "SupervisorGone", "TimedOut", "Timings", "Unsupported", "Worker", "connect", "connect_async",
    "default_socket_path",
]

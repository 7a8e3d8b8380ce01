"""Typed errors of corral_client, one per reason the protocol gives (ErrorCode in corral.fbs,
docs/protocol.md). Each also derives from the matching builtin where there is one, so
`except FileNotFoundError` works too."""

from __future__ import annotations

from typing import Dict, Type


class CorralError(Exception):
    """Any refusal or failure reported by the supervisor. code: the protocol's ErrorCode name."""

    code: str = "internal"

    def __init__(self, message: str, code: str = "") -> None:
        Exception.__init__(self, message)
        self.message = message
        if code:
            self.code = code

    def __str__(self) -> str:
        return self.message


class ProtocolError(CorralError):
    """The connection carried something that is not corral's protocol."""
    code = "malformed"


class SupervisorGone(CorralError, ConnectionError):
    """The supervisor closed the connection or cannot be reached."""
    code = "supervisor_gone"


class NotFound(CorralError, FileNotFoundError):
    """No such file, scope, worker or background command."""
    code = "not_found"


class PermissionDenied(CorralError, PermissionError):
    """The peer's uid may not do this."""
    code = "permission_denied"


class IsADirectory(CorralError, IsADirectoryError):
    code = "is_directory"


class OutsideRoots(CorralError, PermissionError):
    """The path is not beneath an allowed root ('..', an escaping symlink, another tree)."""
    code = "outside_roots"


class RefusedByPolicy(CorralError, PermissionError):
    """The isolation policy forbids it (a write in read-only mode, a request over its scope's
    ceiling)."""
    code = "refused_by_policy"


class Unsupported(CorralError):
    """The host cannot enforce what was asked (the message names the missing layer)."""
    code = "unsupported"


class TimedOut(CorralError, TimeoutError):
    """An evaluation passed its deadline (the worker's state is lost: reset it)."""
    code = "eval_timeout"


class StateLost(CorralError):
    """The worker was killed mid-evaluation; reset() it to go on."""
    code = "state_lost"


class Cancelled(CorralError):
    code = "cancelled"


class InvalidRequest(CorralError, ValueError):
    """A field is missing, absurd or over its limit."""
    code = "invalid_request"


_BY_CODE: Dict[str, Type[CorralError]] = {
    cls.code: cls for cls in (NotFound, PermissionDenied, IsADirectory, OutsideRoots,
                              RefusedByPolicy, Unsupported, TimedOut, StateLost, Cancelled,
                              InvalidRequest)
}


def from_code(code: str, message: str) -> CorralError:
    """The exception for an Error frame's code name."""
    return _BY_CODE.get(code, CorralError)(message, code)

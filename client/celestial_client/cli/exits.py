"""``celestial``'s exit statuses (docs/cli.md), what a script can branch on, and the status of a
service error; apart from program.py so that a command may end with an error's status too
(``operation watch`` of a failed operation)."""

from __future__ import annotations

import grpc

from celestial_client.errors import CelestialClientError

# Exit statuses (docs/cli.md): what a script can branch on.
EXIT = {
    "ok": 0,
    "refused": 1,  # the service refused the request: bad argument, failed precondition, ...
    "usage": 2,  # bad arguments (argparse's own status), a missing file, a missing extra
    "not_found": 3,  # no such memory, entity or relation
    "unreachable": 4,  # the server cannot be reached in time
    "denied": 5,  # not authenticated, or the key may not do this
    "interrupted": 130,  # Ctrl-C, as shells report SIGINT
}
_BY_CODE = {
    grpc.StatusCode.NOT_FOUND: EXIT["not_found"],
    grpc.StatusCode.UNAVAILABLE: EXIT["unreachable"],
    grpc.StatusCode.DEADLINE_EXCEEDED: EXIT["unreachable"],
    grpc.StatusCode.UNAUTHENTICATED: EXIT["denied"],
    grpc.StatusCode.PERMISSION_DENIED: EXIT["denied"],
}


MODEL_UNAVAILABLE = "MODEL_UNAVAILABLE"  # ErrorInfo reason of the server's model failing


def exit_status(err: CelestialClientError) -> int:
    if err.reason == MODEL_UNAVAILABLE:  # the server answered: its model did not
        return EXIT["refused"]
    return _BY_CODE.get(err.code, EXIT["refused"])

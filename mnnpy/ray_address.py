"""Ray cluster addresses as mnnpy takes them (``mnnpy.ray.connect``, the CLI's ``--ray-address``).

Ray retries an address that does not answer as a cluster for many minutes, and says why a
connection failed in its logs or in its own terms (a ``--address`` flag mnnpy does not have).
Here an address is checked before Ray sees it (``checked_address``), what listens there is asked
for Ray's protocol with a deadline (``probe``: the GCS and the Ray Client server speak gRPC,
HTTP/2), and Ray's errors are said in mnnpy's terms with their cause (``connect_error``).
Standard library only: importing this imports no Ray.
"""

from __future__ import annotations

import os
import socket
import time

from mnnpy.errors import InputError

PROBE_S = 5.0  # seconds for what listens at an address to connect and answer
# An HTTP/2 client's preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS frame.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
H2_SETTINGS = 4  # the frame type of an HTTP/2 SETTINGS frame (the 4th byte of its 9-byte header)
FORMS = "give the cluster's GCS address host:6379, ray://host:10001 (Ray Client) or 'auto'"


def checked_address(address: str | None) -> str | None:
    """``address`` stripped (None for a local cluster); ``InputError`` for one that is not text,
    is empty, is a web address (``http://``: the dashboard's, not the cluster's) or has a scheme
    other than ``ray://``, or a ``ray://`` one where Ray Client (``ray[client]``) is missing."""
    if address is None:
        return None
    if not isinstance(address, str) or not address.strip():
        raise InputError(f"a Ray address must be host:port, ray://host:port or 'auto', got {address!r}")
    address = address.strip()
    scheme, sep, _ = address.partition("://")
    if sep and scheme.lower() in ("http", "https"):
        raise InputError(f"{address} is a web address (the Ray dashboard's or jobs API's, port 8265), not the cluster's: {FORMS}")
    if sep and scheme != "ray":
        raise InputError(f"{address}: Ray addresses have no {scheme}:// scheme: {FORMS}")
    if sep:
        try:
            import grpc  # noqa: F401 - what Ray Client needs beyond ray[data]
        except ImportError:
            raise InputError(f"{address}: ray:// addresses need Ray Client: pip install 'mnnpy[ray]' or 'ray[client]'") from None
    return address


def _host_port(address: str | None) -> tuple[str, int] | None:
    """``(host, port)`` of ``"host:port"`` or ``"ray://host:port"``; None for None, ``"auto"`` and the like."""
    host, _, port = (address or "").removeprefix("ray://").rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def probe(address: str | None, timeout_s: float = PROBE_S) -> None:
    """``InputError`` unless what listens at ``address``'s ``host:port`` accepts a connection and
    answers as a gRPC server (Ray's GCS and Ray Client server) within ``timeout_s`` seconds in
    all: nothing listening, a server that never answers (Ray would retry it for many minutes) or
    a web server. None, ``"auto"`` and addresses without a port are left to Ray, as is every
    address when Ray's TLS is on (``RAY_USE_TLS``: the answer is encrypted)."""
    where = _host_port(address)
    if where is None or os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return
    deadline = time.monotonic() + timeout_s
    reply, connected = b"", False
    try:
        with socket.create_connection(where, timeout=timeout_s) as s:
            connected = True
            s.sendall(H2_PREFACE)
            while len(reply) < 9:
                s.settimeout(max(deadline - time.monotonic(), 0.01))
                chunk = s.recv(9 - len(reply))
                if not chunk:
                    break
                reply += chunk
    except TimeoutError:
        if not connected:
            raise InputError(f"no Ray cluster answers at {address}: no connection within {timeout_s:g} s") from None
        if not reply:
            raise InputError(
                f"{address} accepted a connection but did not answer within {timeout_s:g} s: not a Ray cluster; {FORMS}"
            ) from None
    except OSError as e:
        raise InputError(f"no Ray cluster answers at {address}: {e.strerror or e}") from None
    if reply.startswith((b"HTTP/", b"<")):  # a status line, or an HTML error page without one
        raise InputError(f"a web server answers at {address} (the Ray dashboard's port?), not a Ray cluster: {FORMS}")
    if len(reply) < 9 or reply[3] != H2_SETTINGS:
        raise InputError(f"what answers at {address} is not a Ray cluster (it does not speak gRPC): {FORMS}")


def _cause(e: BaseException) -> str:
    """The innermost cause of ``e`` in a line: Ray chains a ``RuntimeError`` whose text is a
    traceback ending in the real error (``ray.exceptions.AuthenticationError: ...``); its first
    sentence, without Ray's advice."""
    while e.__cause__ is not None:
        e = e.__cause__
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    last = lines[-1] if lines else type(e).__name__
    return last.removeprefix("ray.exceptions.").split(". ")[0].rstrip(".")


def connect_error(address: str | None, e: BaseException) -> str:
    """What ``ray.init(address=...)``'s error ``e`` means, in mnnpy's terms, with its cause."""
    cause, text = _cause(e), str(e)
    if "Could not find any running Ray instance" in text:
        return (
            f"no running Ray cluster found for address {address!r} (none started on this machine by"
            " `ray start --head`, RAY_ADDRESS unset): give the cluster's address (host:6379, ray://host:10001),"
            " or start a local one for the job (the CLI's --ray)"
        )
    if "AuthenticationError" in cause or "InvalidAuthToken" in cause:
        return (
            f"the Ray cluster at {address} uses token authentication and this process has no token or another one:"
            f" set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) ({cause})"
        )
    first = text.splitlines()[0] if text.strip() else ""
    detail = f"{type(e).__name__}: {first}" + (f"; cause: {cause}" if e.__cause__ is not None else "")
    if address is None:
        return f"cannot start a local Ray cluster ({detail})"
    return f"cannot connect to the Ray cluster at {address} ({detail})"

"""Ray addresses as mnnpy takes them (``mnnpy.ray_address``, ``mnnpy.ray.connect``, ``--ray-address``):
what does not answer as a cluster is an ``InputError`` within seconds, never a hang; Ray's errors
are said in mnnpy's terms with their cause; a local cluster is a new one; what Ray started is
stopped where starting it fails or is interrupted. No Ray cluster is started here (``ray.init`` is
replaced where a test needs it): tests/test_ray.py runs them."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time

import pytest

import mnnpy
from mnnpy.ray_address import checked_address, connect_error, probe


@contextlib.contextmanager
def silent_server(reply: bytes | None = None):
    """The port of a local server that accepts connections and never answers (``reply`` None)
    or answers ``reply`` to whatever comes, as a web server would."""
    server = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                held.append(conn)
                if reply is not None:
                    conn.recv(64)
                    conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_server_that_never_answers_is_an_input_error_within_seconds(scheme):
    with silent_server() as port:
        t0 = time.monotonic()
        with pytest.raises(mnnpy.InputError, match="accepted a connection but did not answer within 1 s: not a Ray cluster"):
            probe(f"{scheme}127.0.0.1:{port}", timeout_s=1)
        assert time.monotonic() - t0 < 3


def test_the_cli_gives_up_on_a_server_that_never_answers(tmp_path):
    from PIL import Image

    (tmp_path / "in").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "in" / "a.png")
    with silent_server() as port:
        argv = ["ocr", str(tmp_path / "in"), "--out", str(tmp_path / "r.jsonl"), "--ray-address", f"127.0.0.1:{port}"]
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "mnnpy.cli", *argv], capture_output=True, text=True, timeout=90)
    assert done.returncode == 2 and time.monotonic() - t0 < 60, done.stderr
    assert done.stderr.startswith(f"error: 127.0.0.1:{port} accepted a connection but did not answer within 5 s")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize(
    "address, reply, words",
    [
        ("http://127.0.0.1:8265", None, "is a web address (the Ray dashboard's or jobs API's, port 8265), not the cluster's"),
        ("https://head:8265", None, "give the cluster's GCS address host:6379"),
        ("grpc://head:6379", None, "Ray addresses have no grpc:// scheme"),
        ("  ", None, "a Ray address must be"),
        ("127.0.0.1:{port}", b"HTTP/1.1 400 Bad Request\r\n\r\n", "a web server answers at 127.0.0.1:"),
        ("127.0.0.1:{port}", b"<!DOCTYPE HTML>\n<html>", "a web server answers at"),
        ("127.0.0.1:{port}", b"+OK redis-like\r\n", "is not a Ray cluster (it does not speak gRPC)"),
    ],
)
def test_addresses_that_are_not_a_clusters_say_what_to_give(address, reply, words):
    with silent_server(reply or b"") as port:
        with pytest.raises(mnnpy.InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
            probe(checked_address(address.format(port=port)))


def test_a_closed_port_and_addresses_left_to_ray():
    with socket.socket() as s:  # bound, never listening
        s.bind(("127.0.0.1", 0))
        with pytest.raises(mnnpy.InputError, match="no Ray cluster answers at 127.0.0.1:"):
            probe(f"127.0.0.1:{s.getsockname()[1]}")
    for address in (None, "auto"):
        probe(checked_address(address))


def test_ray_addresses_without_ray_client_say_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc raises ImportError
    with pytest.raises(mnnpy.InputError, match=r"ray:// addresses need Ray Client: pip install 'mnnpy\[ray\]'"):
        checked_address("ray://head:10001")
    assert checked_address(" head:6379 ") == "head:6379"


def _auth_failure() -> ConnectionError:
    """What ``ray.init`` raises for a cluster with token authentication and no token here (Ray 2.60)."""
    trace = (
        "Failed to connect to GCS. Last connection error: Traceback (most recent call last):\n"
        '  File "python/ray/includes/common.pxi", line 119, in ray._raylet.check_status\n'
        "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or"
        " incorrect. Note: RAY_AUTH_MODE is currently 'disabled' (not 'token'). Ensure that the token ...\n"
    )
    try:
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379") from RuntimeError(trace)
    except ConnectionError as e:
        return e


def test_rays_errors_in_mnnpys_terms_with_their_cause():
    said = connect_error("10.0.0.1:6379", _auth_failure())
    assert "uses token authentication" in said and "RAY_AUTH_MODE=token" in said and "RAY_AUTH_TOKEN" in said
    assert said.endswith("(AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or incorrect)")
    none = ConnectionError(
        "Could not find any running Ray instance. Please specify the one to connect to by setting `--address` flag"
    )
    said = connect_error("auto", none)
    assert "no running Ray cluster found for address 'auto'" in said and "--address" not in said and "--ray" in said
    try:
        raise ConnectionError("Failed to connect to Ray cluster at h:1") from RuntimeError("Traceback ...\nOSError: disk full\n")
    except ConnectionError as e:
        said = connect_error("h:1", e)
    assert said.startswith("cannot connect to the Ray cluster at h:1 (ConnectionError: Failed to connect to Ray cluster at h:1;")
    assert said.endswith("; cause: OSError: disk full)")
    assert connect_error(None, ValueError("bad")) == "cannot start a local Ray cluster (ValueError: bad)"


@pytest.fixture
def fake_ray(monkeypatch):
    """``mnnpy.ray``'s Ray, not initialised, with ``init`` and ``shutdown`` recorded in ``calls``
    (``init`` raises ``calls["raise"]`` where set)."""
    mnnpy_ray = pytest.importorskip("mnnpy.ray", reason="Ray is not installed")
    calls = {"init": [], "shutdown": 0, "raise": None}

    def init(**kwargs):
        calls["init"].append(kwargs)
        if calls["raise"] is not None:
            raise calls["raise"]

    monkeypatch.setattr(mnnpy_ray.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(mnnpy_ray.ray, "init", init)
    monkeypatch.setattr(mnnpy_ray.ray, "shutdown", lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1))
    return mnnpy_ray, calls


def test_without_an_address_connect_starts_a_new_local_cluster(fake_ray):
    mnnpy_ray, calls = fake_ray
    mnnpy_ray.connect(None, num_cpus=2)
    assert calls["init"][0]["address"] == "local" and calls["init"][0]["num_cpus"] == 2  # never one running here
    assert calls["init"][0]["include_dashboard"] is False and calls["shutdown"] == 0


def test_connect_stops_what_ray_started_when_it_fails_or_is_interrupted(fake_ray):
    mnnpy_ray, calls = fake_ray
    calls["raise"] = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        mnnpy_ray.connect(None)
    calls["raise"] = _auth_failure()
    with pytest.raises(mnnpy.InputError, match="uses token authentication"):
        mnnpy_ray.connect("auto")
    assert calls["shutdown"] == 2

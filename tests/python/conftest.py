"""Fixtures: a real `corral serve` on a private socket, started per test module."""

import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
CORRAL = os.environ.get("CORRAL_BINARY", os.path.join(SOURCE, "build", "tools", "corral"))
PROTO = os.environ.get("CORRAL_PYTHON_DIR", os.path.join(SOURCE, "build", "share", "corral", "python"))
sys.path[0:0] = [os.path.join(SOURCE, "worker_proto", "python"), PROTO]


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="corral-pytest-")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "corral.sock")
        self.log = open(os.path.join(self.dir, "serve.log"), "wb")
        self.proc = subprocess.Popen([CORRAL, "serve", "--socket", self.socket, "--log-level", "warn"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("corral serve did not start: " + open(self.log.name).read())
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        subprocess.run(["rm", "-rf", self.dir])


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    import corral_client
    with corral_client.connect(server.socket) as c:
        yield c


@pytest.fixture
def workdir():
    """A host directory for workspaces, outside /tmp (sandboxes see the host's /tmp nowhere):
    in $CORRAL_TEST_WORK_DIR (the build tree) when set. World-writable, so the sandbox uid may
    write it when the policy lets it."""
    d = tempfile.mkdtemp(prefix="corral-pytest-ws-", dir=os.environ.get("CORRAL_TEST_WORK_DIR"))
    os.chmod(d, 0o777)
    yield d
    subprocess.run(["rm", "-rf", d])

"""corral_client.Client against a real `corral serve` (conftest.py starts it)."""

import os
import subprocess
import sys
import time

import pytest

import corral_client
from corral_client import _wire


def test_exec_argv_and_shell(client):
    r = client.exec(["sh", "-c", "printf out; printf err >&2; exit 3"], timeout=30)
    assert (r.status, r.exit_code, r.stdout, r.stderr) == ("exited", 3, b"out", b"err")
    assert not r.timed_out and not r.truncated and not r.ok
    r = client.exec("echo $((6 * 7))")
    assert r.ok and r.stdout == b"42\n"
    assert r.timings.wall_ms >= 0 and r.temp_dir
    assert "net-ns" in r.enforced  # network denied is the default, and enforced


def test_exec_env_cwd_stdin(client):
    r = client.exec(["sh", "-c", "echo $GREETING; env | grep -c ^SECRET; pwd; cat"],
                    env={"GREETING": "hi"}, cwd="/", stdin=b"\x00bytes\xff")
    assert r.stdout == b"hi\n0\n/\n\x00bytes\xff"
    assert client.exec(["cat"]).stdout == b""  # no stdin: /dev/null


def test_exec_timeout_and_truncation(client):
    r = client.exec(["sleep", "30"], timeout=0.5)
    assert r.timed_out and r.status == "timed_out" and r.exit_code is None
    r = client.exec("yes", max_output=1000)
    assert r.truncated and r.status == "output_limit" and len(r.stdout) == 1000


def test_signal_and_setup_error(client):
    r = client.exec(["sh", "-c", "kill -9 $$"])
    assert (r.status, r.signal, r.exit_code) == ("signaled", 9, None)
    r = client.exec(["/no/such/program"])
    assert r.status == "setup_error" and r.setup_step == "exec" and r.setup_errno == 2


def test_unset_mode_and_network_stay_off_the_wire():
    def request_table(frame):
        msg = _wire.Message.Message.GetRootAs(frame[4:], 0)
        table = _wire.ExecRequest.ExecRequest()
        table.Init(msg.Body().Bytes, msg.Body().Pos)
        return table._tab
    unset = request_table(_wire.exec_request(1, _wire.ExecArgs(["true"])))
    assert unset.Offset(4 + 2 * 8) == 0 and unset.Offset(4 + 2 * 9) == 0  # mode, network
    ro = request_table(_wire.exec_request(1, _wire.ExecArgs(["true"], mode="read-only", network="allowed")))
    assert ro.Offset(4 + 2 * 8) != 0 and ro.Offset(4 + 2 * 9) != 0
    with pytest.raises(ValueError):
        _wire.exec_request(1, _wire.ExecArgs(["true"], mode="wide-open"))


def test_read_only_mode_and_caps(client, workdir):
    r = client.exec(["sh", "-c", "echo x > " + workdir + "/f"], mode="read-only", workspaces=[workdir])
    assert r.exit_code != 0 and not os.path.exists(workdir + "/f")
    assert b"Read-only file system" in r.stderr
    r = client.exec(["sh", "-c", "echo x > " + workdir + "/f"], mode="workspace-write", workspaces=[workdir])
    assert r.ok and open(workdir + "/f").read() == "x\n"  # the control: the same write, allowed
    r = client.exec(["true"], caps=corral_client.Caps(memory_bytes=256 << 20, pids=64))
    assert r.ok


def test_default_bounds_and_explicit_unlimited(client):
    defaults = {d["name"]: d for d in client.status()["defaults"]}
    assert set(defaults) >= {"memory", "pids", "temp-size", "timeout", "max-output"}
    assert defaults["pids"]["value"] == 2048 and defaults["pids"]["enforced"]
    memory = defaults["memory"]
    # Enforced exactly where the host has a memory cgroup; then every command without a cap has one.
    has_cgroup = any(l.name == "cgroup-memory" and l.available for l in client.layers)
    assert memory["enforced"] == has_cgroup
    r = client.exec(["true"])
    assert r.ok and (("cgroup-memory" in r.enforced) == has_cgroup)
    # 0 is "unlimited", said explicitly: it reaches the supervisor, and no default applies.
    r = client.exec(["true"], caps=corral_client.Caps(memory_bytes=0, pids=0))
    assert r.ok and "cgroup-memory" not in r.enforced


def test_stream_iterator_sees_output_while_it_runs(client):
    with client.scope() as scope:
        go = os.path.join(scope.temp_dir, "go")
        stream = scope.stream("echo ready; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done")
        seen = []
        for chunk in stream:
            seen.append(chunk.data)
            if chunk.data == b"ready\n":
                open(go, "w").close()  # the command can only end after we saw its first line
        assert b"".join(seen) == b"ready\ndone\n"
        assert stream.result.ok and stream.result.stdout == b"ready\ndone\n"


def test_stream_callback_and_nested_calls(client):
    chunks = []

    def on_output(chunk):
        chunks.append(chunk)
        client.status()  # a nested call inside the callback loses none of the outer output

    r = client.exec("for i in 1 2 3; do echo $i; echo e$i >&2; done", on_output=on_output)
    assert b"".join(c.data for c in chunks if c.stream == "stdout") == b"1\n2\n3\n" == r.stdout
    assert b"".join(c.data for c in chunks if c.stream == "stderr") == b"e1\ne2\ne3\n" == r.stderr


def test_dropping_a_call_leaves_nothing_running(client):
    stream = client.stream(["sh", "-c", "echo started; sleep 60"])
    assert next(stream).data == b"started\n"
    stream.close()
    assert client.status()["running_commands"] == 0

    def boom(chunk):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        client.exec(["sh", "-c", "echo started; sleep 60"], on_output=boom)
    assert client.status()["running_commands"] == 0
    assert client.exec(["echo", "still usable"]).stdout == b"still usable\n"


def test_scope_create_reattach_close(server, client):
    with client.scope(detach=True) as scope:
        assert scope.exec(["sh", "-c", "echo kept > /tmp/state"]).ok
        with corral_client.connect(server.socket) as other:
            again = other.scope(scope.id)
            assert again.exec(["cat", "/tmp/state"]).stdout == b"kept\n"
            with again:
                pass  # leaving a reattached scope's block does not close it
            assert again.read("/tmp/state").text == "kept\n"
    with pytest.raises(corral_client.NotFound):
        client.exec(["true"], scope=scope.id)
    assert not os.path.exists(scope.temp_dir)


def test_background_poll_wait_stop(client):
    with client.scope() as scope:
        bg = scope.spawn("echo one; sleep 0.2; echo two")
        first = bg.poll()
        assert first.state in ("running", "exited")
        r = bg.wait(timeout=30)
        assert r.ok and r.stdout == b"one\ntwo\n"

        long = scope.spawn(["sleep", "60"])
        assert long.poll().running
        long.stop()
        r = long.wait(timeout=30)
        assert r.status in ("signaled", "cancelled") and r.exit_code is None
        with pytest.raises(corral_client.NotFound):
            client._poll("no-such-background")


def test_files(client, workdir):
    ws = [workdir]
    assert client.write("notes.txt", "héllo\nworld\n", workspaces=ws) == len("héllo\nworld\n".encode())
    assert client.write("blob.bin", b"\x00\xff\x01", workspaces=ws) == 3
    window = client.read("notes.txt", offset=1, limit=4, workspaces=ws)
    assert (window.data, window.offset, window.file_size, window.truncated) == (b"\xc3\xa9ll", 1, 13, True)
    assert client.read("notes.txt", workspaces=ws).text == "héllo\nworld\n"
    assert client.read_bytes("blob.bin", workspaces=ws) == b"\x00\xff\x01"
    assert client.read_bytes("blob.bin", 2, workspaces=ws) == b"\x00\xff"
    os.mkdir(workdir + "/sub")
    entries = {e.name: e for e in client.ls(".", workspaces=ws)}
    assert set(entries) == {"notes.txt", "blob.bin", "sub"}
    assert entries["sub"].type == "dir" and entries["blob.bin"].size == 3

    with pytest.raises(corral_client.NotFound) as e:
        client.read("missing.txt", workspaces=ws)
    assert isinstance(e.value, FileNotFoundError) and e.value.code == "not_found"
    with pytest.raises(corral_client.IsADirectory):
        client.read("sub", workspaces=ws)
    with pytest.raises(corral_client.OutsideRoots):
        client.read("../escape", workspaces=ws)
    with pytest.raises(corral_client.OutsideRoots):
        client.read("/etc/passwd", workspaces=ws)
    os.symlink("/etc/passwd", workdir + "/link")
    with pytest.raises(corral_client.OutsideRoots):
        client.read("link", workspaces=ws)
    with pytest.raises(corral_client.RefusedByPolicy):
        client.write("notes.txt", "no", workspaces=ws, mode="read-only")
    with pytest.raises(corral_client.InvalidRequest):
        client.read("blob.bin", workspaces=ws)  # not UTF-8 text
    assert client.read("notes.txt", workspaces=ws).text == "héllo\nworld\n"


def test_python_worker(client):
    with client.scope() as scope, scope.worker("py", python=True) as py:
        assert py.eval("x = 20").ok
        r = py.eval("print('side'); x * 2 + 2")
        assert (r.ok, r.value, r.stdout) == (True, "42", "side\n")
        r = py.eval("def f():\n    raise ValueError('bad')\nf()")
        assert not r.ok and r.error == "ValueError: bad"
        assert "Traceback" in r.traceback and "in f" in r.traceback

        calls = []

        def host(data):
            calls.append(data)
            if data == b"fail":
                raise RuntimeError("host says no")
            return b"answer to " + data

        r = py.eval("host_call(b'q1').decode()", host=host)
        assert r.value == "'answer to q1'" and calls == [b"q1"]
        r = py.eval("host_call(b'fail')", host=host)
        assert not r.ok and "host says no" in r.error

        with pytest.raises(corral_client.TimedOut):
            py.eval("import time; time.sleep(30)", timeout=0.5)
        with pytest.raises(corral_client.StateLost):
            py.eval("x")
        py.reset()
        r = py.eval("'x' in globals()")
        assert r.value == "False"


def test_authorized_launch(client):
    with client.scope() as scope:
        seen = []
        r = scope.exec(["sh", "-c", "echo ran > /tmp/ran; echo ok"],
                       authorizer=lambda d: seen.append(d) or True)
        assert r.launched is True and r.stdout == b"ok\n"
        assert seen[0]["argv"] == ["sh", "-c", "echo ran > /tmp/ran; echo ok"]
        os.unlink(os.path.join(scope.temp_dir, "ran"))

        r = scope.exec(["sh", "-c", "echo ran > /tmp/ran"], authorizer=lambda d: (False, "not today"))
        assert r.launched is False and "not today" in r.message
        r = scope.exec(["sh", "-c", "echo ran > /tmp/ran"], authorizer=lambda d: 1 / 0)
        assert r.launched is False
        assert not os.path.exists(os.path.join(scope.temp_dir, "ran"))  # nothing ran


def test_supervisor_gone(tmp_path):
    with pytest.raises(corral_client.SupervisorGone):
        corral_client.connect(str(tmp_path / "nobody-listens.sock"))
    from conftest import Server
    doomed = Server()
    try:
        c = corral_client.connect(doomed.socket)
        doomed.proc.kill()
        doomed.proc.wait()
        with pytest.raises(corral_client.SupervisorGone) as e:
            c.exec(["sleep", "10"])
        assert isinstance(e.value, ConnectionError)
    finally:
        doomed.stop()


def test_default_socket_path(monkeypatch):
    monkeypatch.setenv("CORRAL_SOCKET", "/x/y.sock")
    assert corral_client.default_socket_path() == "/x/y.sock"
    monkeypatch.delenv("CORRAL_SOCKET")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert corral_client.default_socket_path() == "/run/user/7/corral/corral.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    expected = "/run/corral/corral.sock" if os.geteuid() == 0 else "/tmp/corral-%d/corral.sock" % os.geteuid()
    assert corral_client.default_socket_path() == expected


def test_example_script_runs(server):
    import conftest
    script = os.path.join(conftest.SOURCE, "worker_proto", "python", "example_client.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(conftest.SOURCE, "worker_proto", "python"), conftest.PROTO]))
    out = subprocess.run(["/usr/bin/python3", script, server.socket], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "exited 0 hello from the sandbox", "kept in the scope's temp dir", "stdout line 1",
        "stdout line 2", "stdout line 3", "python says 42"], out.stdout


def test_scope_policy_is_a_ceiling(client, workdir):
    open(workdir + "/secret", "w").write("hidden\n")
    open(workdir + "/kept", "w").write("kept\n")
    with client.scope(mode="read-only", workspaces=[workdir], deny_read=[workdir + "/secret"],
                      protect=[workdir + "/kept"]) as scope:
        # mode and network left unset: the scope's (read-only), not the wire's old default.
        r = scope.exec(["sh", "-c", "echo x > " + workdir + "/new"], workspaces=[workdir])
        assert r.exit_code != 0 and not os.path.exists(workdir + "/new")
        with pytest.raises(corral_client.RefusedByPolicy):
            scope.exec(["true"], mode="workspace-write")  # wider than the ceiling
        with pytest.raises(corral_client.RefusedByPolicy):
            scope.read(workdir + "/secret", workspaces=[workdir])  # the file tools obey --deny-read
        assert scope.read(workdir + "/kept", workspaces=[workdir]).text == "kept\n"
        with pytest.raises(corral_client.RefusedByPolicy):
            scope.write(workdir + "/kept", "no", workspaces=[workdir])

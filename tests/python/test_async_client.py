"""corral_client.AsyncClient: the same methods as Client, as coroutines, many in flight."""

import asyncio
import os

import pytest

import corral_client


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_exec_concurrent_and_streaming(server):
    async def main():
        async with await corral_client.connect_async(server.socket) as c:
            r = await c.exec(["sh", "-c", "echo out; echo err >&2; exit 4"], timeout=30)
            assert (r.exit_code, r.stdout, r.stderr) == (4, b"out\n", b"err\n")
            # Three commands in flight on one connection; each waits for the next one's file,
            # so they can only finish if they run at the same time.
            async with await c.scope() as scope:
                cmd = "touch /tmp/{me}; while [ ! -e /tmp/{other} ]; do sleep 0.05; done; echo {me}"
                rs = await asyncio.gather(*(scope.exec(cmd.format(me=i, other=(i + 1) % 3), timeout=60)
                                            for i in range(3)))
                assert [x.stdout for x in rs] == [b"0\n", b"1\n", b"2\n"]
                got = [chunk.data async for chunk in c.stream("echo a; echo b >&2", scope=scope)]
                assert b"".join(sorted(got)) == b"a\nb\n"
                chunks = []
                r = await c.exec("echo cb", on_output=chunks.append)
                assert chunks[0].data == b"cb\n" == r.stdout
    run(main())


def test_cancelling_a_task_ends_its_command(server):
    async def main():
        async with await corral_client.connect_async(server.socket) as c:
            started = asyncio.Event()
            task = asyncio.ensure_future(c.exec(["sh", "-c", "echo go; sleep 60"],
                                                on_output=lambda ch: started.set()))
            await started.wait()
            assert (await c.status())["running_commands"] == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(200):
                if (await c.status())["running_commands"] == 0:
                    break
                await asyncio.sleep(0.05)
            assert (await c.status())["running_commands"] == 0
            async for chunk in c.stream(["sh", "-c", "echo first; sleep 60"]):
                break  # leaving the loop cancels the command
            for _ in range(200):
                if (await c.status())["running_commands"] == 0:
                    break
                await asyncio.sleep(0.05)
            assert (await c.status())["running_commands"] == 0
            assert (await c.exec(["echo", "alive"])).stdout == b"alive\n"
    run(main())


def test_scope_files_background_worker_authorization(server, workdir):
    async def main():
        async with await corral_client.connect_async(server.socket) as c:
            async with await c.scope() as scope:
                assert await scope.write("/tmp/a.txt", "text") == 4
                assert (await scope.read("/tmp/a.txt")).text == "text"
                assert await scope.read_bytes("/tmp/a.txt", 2) == b"te"
                assert [e.name for e in await scope.ls("/tmp")] == ["a.txt"]
                with pytest.raises(corral_client.NotFound):
                    await scope.read("/tmp/none")
                with pytest.raises(corral_client.OutsideRoots):
                    await c.read("/etc/passwd", workspaces=[workdir])

                bg = await scope.spawn("echo bg")
                assert (await bg.wait(timeout=30)).stdout == b"bg\n"

                async with await scope.worker("py", python=True) as py:
                    await py.eval("n = 1")

                    async def host(data):
                        await asyncio.sleep(0)
                        return data.upper()
                    r = await py.eval("n += 1; host_call(b'abc').decode() + str(n)", host=host)
                    assert r.value == "'ABC2'"
                    with pytest.raises(corral_client.TimedOut):
                        await py.eval("while True: pass", timeout=0.5)
                    await py.reset()
                    assert (await py.eval("1 + 1")).value == "2"

                async def grant(description):
                    return description["argv"] == ["echo", "yes"]
                assert (await scope.exec(["echo", "yes"], authorizer=grant)).launched is True
                r = await scope.exec(["echo", "no"], authorizer=grant)
                assert r.launched is False and r.stdout == b""
            assert not os.path.exists(scope.temp_dir)
    run(main())


def test_supervisor_gone(tmp_path):
    async def main():
        with pytest.raises(corral_client.SupervisorGone):
            await corral_client.connect_async(str(tmp_path / "none.sock"))
    run(main())

#!/usr/bin/python3
"""A runnable tour of corral_client (README "Python client"); tests/python runs it.

    PYTHONPATH=build/share/corral/python /usr/bin/python3 worker_proto/python/example_client.py [SOCKET]
"""
import sys

import corral_client

with corral_client.connect(sys.argv[1] if len(sys.argv) > 1 else None) as corral:
    r = corral.exec(["echo", "hello from the sandbox"], timeout=10)
    print(r.status, r.exit_code, r.stdout.decode().strip())
    with corral.scope() as scope:                        # closed (and cleaned) on exit
        scope.write("/tmp/notes.txt", "kept in the scope's temp dir\n")
        print(scope.read("/tmp/notes.txt").text.strip())
        for chunk in scope.stream("for i in 1 2 3; do echo line $i; done"):
            for line in chunk.data.decode().splitlines():  # output as it comes
                print(chunk.stream, line)
        with scope.worker("py", python=True) as py:      # a persistent interpreter
            py.eval("total = 40")
            print("python says", py.eval("total + 2").value)

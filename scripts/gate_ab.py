#!/usr/bin/env python3
"""What the connection gate costs a request: two `outpost serve` builds side by
side, each on a fresh SQLite file, answering the same requests in turns.

    scripts/gate_ab.py BEFORE_BINARY AFTER_BINARY [--rounds N]

Each round sends, to both servers in a random order: a pull on a kept-alive
connection, a pull on a fresh connection (opened, answered, closed: every step
of the gate), and a one-mutation push on a kept-alive connection. The machine's
noise hits both alike; the figure is the ratio of the medians (after / before).
"""
import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import tempfile
import time
import uuid


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, folder, name):
    database = os.path.join(folder, name + ".sqlite")
    issued = subprocess.run(
        [binary, "token", "issue", "--user", "u-1", "--role", "field", "--team", "t-1", "--database", database],
        check=True, capture_output=True, text=True)
    token = issued.stdout.strip().splitlines()[-1]
    port = free_port()
    process = subprocess.Popen(
        [binary, "serve", "--database", database, "--port", str(port), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline or process.poll() is not None:
                process.kill()
                raise SystemExit(f"{binary} did not start listening on port {port}")
            time.sleep(0.1)
    return process, port, token


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=2000)
    arguments = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="outpost-gate-ab-")
    servers = {}
    try:
        for name, binary in (("before", arguments.before), ("after", arguments.after)):
            servers[name] = start(binary, folder, name)
        kept = {name: http.client.HTTPConnection("127.0.0.1", port) for name, (_, port, _) in servers.items()}
        client = {name: str(uuid.uuid4()) for name in servers}
        seq = {name: 0 for name in servers}
        kinds = ("pull, kept-alive", "pull, fresh connection", "push, kept-alive")
        times = {(name, kind): [] for name in servers for kind in kinds}

        def ask(name, path, body=None, fresh=False):
            _, port, token = servers[name]
            connection = http.client.HTTPConnection("127.0.0.1", port) if fresh else kept[name]
            headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
            if fresh:
                headers["Connection"] = "close"
            started = time.perf_counter()
            connection.request("POST" if body else "GET", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            elapsed = time.perf_counter() - started
            if fresh:
                connection.close()
            if response.status != 200:
                raise SystemExit(f"{name}: {path} answered {response.status}")
            return elapsed

        for _ in range(arguments.rounds):
            order = list(servers)
            random.shuffle(order)
            for name in order:
                times[(name, kinds[0])].append(ask(name, "/v1/pull?limit=10"))
                times[(name, kinds[1])].append(ask(name, "/v1/pull?limit=10", fresh=True))
                seq[name] += 1
                mutation = {"seq": seq[name], "id": str(uuid.uuid4()), "op": "create", "collection": "people",
                            "uuid": str(uuid.uuid4()), "data": {"name": "P"}}
                body = json.dumps({"client_id": client[name], "mutations": [mutation]})
                times[(name, kinds[2])].append(ask(name, "/v1/push", body))
        for kind in kinds:
            before = statistics.median(times[("before", kind)]) * 1000
            after = statistics.median(times[("after", kind)]) * 1000
            print(f"{kind}: before {before:.3f} ms, after {after:.3f} ms (medians of {arguments.rounds}); "
                  f"ratio {after / before:.3f}")
    finally:
        for process, _, _ in servers.values():
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    main()

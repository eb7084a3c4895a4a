"""Outpost beside a peer sync server (Kinto), measured in the same run.

Driven by scripts/peer-bench, which builds outpost, prepares Kinto's virtual
environment and the throwaway PostgreSQL, and runs this file with that
environment's Python (psycopg2 comes with Kinto's PostgreSQL backend).

Every figure is measured with this one Python client against both servers,
so the client's own costs (JSON encoding and parsing, http.client) are the
same on both sides; Outpost's own engine is measured beside them.
"""

import argparse
import base64
import csv
import datetime
import glob
import io
import json
import os
import platform
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import uuid
import http.client

import psycopg2

COLLECTION = "people"
USER = "bench"
TEAM = "t"
KINTO_BUCKET = "bench"
KINTO_RECORDS = f"/v1/buckets/{KINTO_BUCKET}/collections/{COLLECTION}/records"


class BenchFailure(Exception):
    """Something did not work: the run must end non-zero, with this message."""


def log(message):
    print(f"peer-bench: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- records

STREETS = ["Via Roma", "Calle Mayor", "Rua Augusta", "Nevsky Prospekt", "Avenida Juárez"]
NAMES = ["Lucía Romero", "Marco Bianchi", "Olga Petrova", "João Costa", "Ana Torres", "Ivan Sokolov"]


def record_data(index):
    """Bench.recordData of BenchSupport.swift, so that the rows `outpost seed`
    writes and the ones pushed here are the same records."""
    created = datetime.datetime.fromtimestamp(1_780_000_000 + index * 7, datetime.timezone.utc)
    return {
        "name": f"{NAMES[index % len(NAMES)]} {index}",
        "phone": "555-%07d" % index,
        "address": f"{STREETS[index % len(STREETS)]} {index % 300 + 1}, interior {index % 12}",
        "notes": f"Captured in the field during the census round {index % 17}; visit again in the morning if nobody answers.",
        "section": index % 400,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def data_text(index):
    # The server's canonical form (sorted keys, compact, UTF-8), for Kinto's rows too.
    return json.dumps(record_data(index), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- HTTP client


class Client:
    """One keep-alive connection, as a sync client holds; times each exchange
    from sending the request to having read the whole body."""

    def __init__(self, port, headers, timeout):
        self.port = port
        self.headers = headers
        self.timeout = timeout
        self.connection = None
        self.bytes_read = 0

    def request(self, method, path, body=None):
        """(status, headers, body bytes, seconds of HTTP). `body` is bytes
        encoded beforehand, so encoding is never inside the timed span."""
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            start = time.perf_counter()
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A server may close an idle keep-alive connection between two
                # phases; a fresh one is what any client would open.
                self.close()
                if attempt == 2:
                    raise
                continue
            seconds = time.perf_counter() - start
            self.bytes_read += len(payload)
            if response.getheader("Connection", "").lower() == "close":
                self.close()
            return response.status, response, payload, seconds
        raise AssertionError("unreachable")

    def json(self, method, path, body=None, expect=(200,)):
        status, response, payload, seconds = self.request(method, path, body)
        if status not in expect:
            raise BenchFailure(f"{method} {path.split('?')[0]} answered {status}: {payload[:300]!r}")
        return json.loads(payload), response, seconds

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


# ---------------------------------------------------------------- processes


class Processes:
    """Every server this run starts, stopped at the end whatever happens. Their
    ids also go to a file the bash wrapper reads in its trap, so a killed
    Python leaves nothing running either."""

    def __init__(self, pid_file):
        self.pid_file = pid_file
        self.running = []

    def start(self, arguments, **options):
        process = subprocess.Popen(arguments, **options)
        self.running.append(process)
        if self.pid_file:
            with open(self.pid_file, "a") as handle:
                handle.write(f"{process.pid}\n")
        return process

    def stop(self, process):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process in self.running:
            self.running.remove(process)
        if self.pid_file:
            # Only servers still running stay listed: an id is not signalled after it may have been reused.
            with open(self.pid_file, "w") as handle:
                handle.writelines(f"{running.pid}\n" for running in self.running)

    def stop_all(self):
        for process in list(reversed(self.running)):
            try:
                self.stop(process)
            except Exception as error:  # keep stopping the others
                log(f"could not stop process {process.pid}: {error}")


def run_command(arguments, timeout, what):
    try:
        done = subprocess.run(arguments, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchFailure(f"{what} did not finish within {timeout} s")
    if done.returncode != 0:
        raise BenchFailure(f"{what} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return done.stdout


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RequestLog:
    """A server's request log, read from an offset: the server's own time per
    request. A line is written after the answer is sent, so a reader waits
    (bounded) until the requests it made are all there."""

    def __init__(self, path, parse):
        self.path = path
        self.parse = parse  # line -> (path, status, seconds) or None

    def offset(self):
        return os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def seconds(self, since, path, expected, timeout=10):
        deadline = time.monotonic() + timeout
        settled = False
        while True:
            total, count = 0.0, 0
            with open(self.path, "rb") as handle:
                handle.seek(since)
                for line in handle.read().decode("utf-8", "replace").splitlines():
                    entry = self.parse(line)
                    if entry and entry[0] == path and entry[1] < 400:
                        total += entry[2]
                        count += 1
            if count >= expected and settled:
                return total
            if count >= expected:
                settled = True  # read once more: a client may have made requests not counted
            elif time.monotonic() > deadline:
                raise BenchFailure(f"{self.path}: {count} of {expected} requests to {path} logged")
            time.sleep(0.05)


def outpost_log_entry(line):
    if not line.startswith("{"):
        return None
    try:
        entry = json.loads(line)
        return entry.get("path"), int(entry.get("status", 0)), float(entry["duration_ms"]) / 1000
    except (ValueError, KeyError):
        return None


def gunicorn_log_entry(line):
    # --access-logformat '%(U)s %(s)s %(D)s': path, status, microseconds.
    parts = line.split()
    if len(parts) != 3:
        return None
    try:
        return parts[0], int(parts[1]), int(parts[2]) / 1e6
    except ValueError:
        return None


# ---------------------------------------------------------------- servers


class OutpostServer:
    def __init__(self, name, label, database, args, processes, work):
        self.name = name
        self.label = label
        self.database = database
        self.args = args
        self.processes = processes
        self.log = RequestLog(os.path.join(work, f"{name}.log"), outpost_log_entry)
        self.work = work
        self.process = None
        self.port = None
        self.client_id = str(uuid.uuid4())
        self.seq = 0
        self.cursor = None
        self.ids = []
        self.catalogs = None

    def prepare(self, bulk):
        outpost = self.args.outpost
        if bulk > 0:
            start = time.perf_counter()
            run_command([outpost, "seed", "--people", str(bulk), "--owner", USER, "--team", TEAM, "--database", self.database],
                        self.args.seed_timeout, f"outpost seed ({self.label})")
            log(f"{self.label}: {bulk:,} records loaded with outpost seed in {time.perf_counter() - start:.1f} s")
        output = run_command([outpost, "token", "issue", "--user", USER, "--role", "field", "--team", TEAM, "--database", self.database],
                             60, f"outpost token issue ({self.label})")
        self.token = output.strip().splitlines()[-1].strip()

    def start(self):
        stderr = open(self.log.path, "ab")
        try:
            self.process = self.processes.start(
                [self.args.outpost, "serve", "--database", self.database, "--port", "0"],
                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL)
        finally:
            stderr.close()
        # The first stdout line is "listening on port N".
        line = b""
        deadline = time.monotonic() + self.args.start_timeout
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None:
                raise BenchFailure(f"{self.label}: outpost serve did not start (it exited, or printed no port in {self.args.start_timeout:.0f} s); "
                                   f"its log ends: {tail(self.log.path) or '(empty)'}")
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 256)
                if not chunk:
                    continue
                line += chunk
        try:
            self.port = int(line.split()[-1])
        except ValueError:
            raise BenchFailure(f"{self.label}: unexpected first line from outpost serve: {line!r}")
        self.client = Client(self.port, {"Authorization": f"Bearer {self.token}", "Outpost-Device": self.client_id},
                             self.args.http_timeout)

    # push intake ---------------------------------------------------------

    def push_body(self, mutations):
        return json.dumps({"client_id": self.client_id, "mutations": mutations},
                          separators=(",", ":"), ensure_ascii=False).encode()

    def next_seq(self):
        self.seq += 1
        return self.seq

    def create_body(self, indices, record_ids):
        return self.push_body([
            {"seq": self.next_seq(), "id": str(uuid.uuid4()), "op": "create", "collection": COLLECTION,
             "uuid": record_ids[i], "data": record_data(i)} for i in indices])

    def update_body(self, ids, text):
        return self.push_body([
            {"seq": self.next_seq(), "id": str(uuid.uuid4()), "op": "update", "collection": COLLECTION,
             "uuid": record_id, "data": {"notes": text}} for record_id in ids])

    def push(self, body, count):
        answer, _, seconds = self.client.json("POST", "/v1/push", body)
        statuses = [result.get("status") for result in answer.get("results", [])]
        if len(statuses) != count or any(status != "applied" for status in statuses):
            raise BenchFailure(f"{self.label}: a push of {count} got {statuses.count('applied')} applied "
                               f"({sorted(set(statuses))})")
        return seconds

    push_path = "/v1/push"

    # download ------------------------------------------------------------

    download_path = "/v1/pull"
    incremental_path = "/v1/pull"

    def pull(self, cursor, collection=COLLECTION, page_size=None):
        """Pages from `cursor` (None: the whole scope) to the end: (changes,
        requests, HTTP seconds, the last cursor)."""
        changes, requests, http_seconds = [], 0, 0.0
        while True:
            query = {"collections": collection, "limit": str(page_size or self.args.page_size)}
            if cursor:
                query["cursor"] = cursor
            page, _, seconds = self.client.json("GET", "/v1/pull?" + urllib.parse.urlencode(query))
            requests += 1
            http_seconds += seconds
            changes.extend(page["changes"])
            cursor = page["cursor"]
            if not page.get("has_more"):
                return changes, requests, http_seconds, cursor

    def download(self):
        changes, requests, http_seconds, self.cursor = self.pull(None)
        return changes, requests, http_seconds

    @staticmethod
    def content(changes):
        """(id, data) of each live record in a download, read after the timed part."""
        return [(change["uuid"], change["data"]) for change in changes if not change.get("deleted")]

    def changes_since(self):
        changes, requests, http_seconds, self.cursor = self.pull(self.cursor)
        return [change["uuid"] for change in changes], requests, http_seconds

    def catalog_count(self):
        if self.catalogs is None:
            changes = self.pull(None, collection="catalogs", page_size=5000)[0]
            self.catalogs = sum(not change.get("deleted") for change in changes)
        return self.catalogs

    def engine_download(self, run):
        """Outpost's own client (SyncEngine into a fresh SQLite store), as
        `outpost bench initial-sync` runs it: `outpost _bench-client`."""
        store = os.path.join(self.work, f"engine-{self.name}-{run}.sqlite")
        try:
            output = run_command([self.args.outpost, "_bench-client", "--server", f"http://127.0.0.1:{self.port}",
                                  "--token", self.token, "--db", store], self.args.http_timeout * 4,
                                 f"{self.label}: the engine's download")
        finally:
            # The store and what lies beside it (-wal, -shm, .outpost-id): about 100 MB a run.
            for path in glob.glob(glob.escape(store) + "*"):
                os.remove(path)
        # Its peak RSS is not kept: started from this process, it reports this
        # process's peak (Linux carries ru_maxrss across the exec).
        figures = json.loads(output)
        return figures["records"], figures["seconds"]


class KintoServer:
    name = "kinto"
    label = "Kinto (PostgreSQL)"
    push_path = "/v1/batch"
    download_path = KINTO_RECORDS
    incremental_path = KINTO_RECORDS

    def __init__(self, args, processes, work):
        self.args = args
        self.processes = processes
        self.work = work
        self.log = RequestLog(os.path.join(work, "kinto-access.log"), gunicorn_log_entry)
        self.errors = os.path.join(work, "kinto-errors.log")
        self.ini = os.path.join(work, "kinto.ini")
        self.since = None
        self.ids = []
        credentials = base64.b64encode(f"{USER}:peer-bench-secret".encode()).decode()
        self.headers = {"Authorization": f"Basic {credentials}"}

    def write_ini(self):
        url = self.args.kinto_postgres
        # Kinto's PostgreSQL backends for storage, permissions and cache, as
        # `kinto init --backend postgresql --cache-backend postgresql` sets
        # them (its defaults are in-memory, which keep nothing and share
        # nothing between gunicorn's processes). No plugins (history,
        # accounts, admin), so that a write is only a write. Basic auth: no
        # account lookup per request. `batch_max_requests` is raised from 25
        # so that one batch carries as many changes as an Outpost push.
        with open(self.ini, "w") as handle:
            handle.write(f"""[app:main]
use = egg:kinto
kinto.includes =
kinto.storage_backend = kinto.core.storage.postgresql
kinto.storage_url = {url}
kinto.permission_backend = kinto.core.permission.postgresql
kinto.permission_url = {url}
kinto.cache_backend = kinto.core.cache.postgresql
kinto.cache_url = {url}
kinto.batch_max_requests = 500
kinto.storage_max_fetch_size = 10000
kinto.bucket_create_principals = system.Authenticated
kinto.userid_hmac_secret = peer-bench-{uuid.uuid4().hex}
multiauth.policies = basicauth
multiauth.policy.basicauth.use = kinto.core.authentication.BasicAuthAuthenticationPolicy

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = plain

[logger_root]
level = WARNING
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = plain

[formatter_plain]
format = %(asctime)s %(levelname)s %(name)s %(message)s
""")

    def prepare(self, bulk):
        self.write_ini()
        run_command([os.path.join(self.args.venv_bin, "kinto"), "migrate", "--ini", self.ini], 120, "kinto migrate")
        self.start()
        self.client.json("PUT", f"/v1/buckets/{KINTO_BUCKET}", b"{}", expect=(200, 201))
        self.client.json("PUT", f"/v1/buckets/{KINTO_BUCKET}/collections/{COLLECTION}", b"{}", expect=(200, 201))
        if bulk > 0:
            start = time.perf_counter()
            self.bulk_load(bulk)
            log(f"{self.label}: {bulk:,} records loaded into its objects table in {time.perf_counter() - start:.1f} s")

    def bulk_load(self, count):
        """Rows as Kinto's own create would store them (storage/postgresql
        `create`: data without id and last_modified, parent
        /buckets/B/collections/C, resource 'record'). Per-record ACL rows are
        not written: records inherit the bucket's permissions, which is how
        the benchmark user reads them."""
        parent = f"/buckets/{KINTO_BUCKET}/collections/{COLLECTION}"
        now_ms = int(time.time() * 1000)
        # Distinct, ascending times in the past: all that Kinto's timestamp
        # trigger would ensure, so it is skipped (session_replication_role).
        first_ms = now_ms - count - 60_000
        connection = psycopg2.connect(self.args.kinto_postgres)
        try:
            with connection, connection.cursor() as cursor:
                cursor.execute("SET session_replication_role = replica")
                cursor.execute("CREATE TEMP TABLE staging (id text, data jsonb, ms bigint)")
                chunk = 20_000
                for start in range(0, count, chunk):
                    buffer = io.StringIO()
                    writer = csv.writer(buffer)
                    for index in range(start, min(count, start + chunk)):
                        writer.writerow([str(uuid.uuid4()), data_text(index), first_ms + index])
                    buffer.seek(0)
                    cursor.copy_expert("COPY staging FROM STDIN WITH (FORMAT csv)", buffer)
                cursor.execute(
                    "INSERT INTO objects (id, parent_id, resource_name, data, last_modified, deleted) "
                    "SELECT id, %s, 'record', data, from_epoch(ms), FALSE FROM staging", (parent,))
        finally:
            connection.close()

    def start(self):
        with open(self.errors, "ab") as errors:
            self.launch(errors)

    def launch(self, errors):
        for attempt in range(5):
            self.port = free_port()
            self.process = self.processes.start(
                [os.path.join(self.args.venv_bin, "gunicorn"), "--paste", self.ini,
                 "--bind", f"127.0.0.1:{self.port}",
                 # Two processes for two cores, threads for keep-alive
                 # connections (a sync worker would close each one).
                 "--workers", "2", "--worker-class", "gthread", "--threads", "4",
                 # Idle connections kept as long as outpost serve keeps them (10 s).
                 "--keep-alive", "10",
                 "--timeout", str(int(self.args.http_timeout)),
                 "--access-logfile", self.log.path, "--access-logformat", "%(U)s %(s)s %(D)s",
                 "--error-logfile", self.errors,
                 # Its default control socket is one path in $HOME for every gunicorn.
                 "--no-control-socket"],
                # KINTO_INI: the file Kinto's root view reports the hash of.
                env={**os.environ, "KINTO_INI": self.ini},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors)
            self.client = Client(self.port, self.headers, self.args.http_timeout)
            deadline = time.monotonic() + self.args.start_timeout
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    status, _, _, _ = Client(self.port, {}, 5).request("GET", "/v1/")
                    if status == 200:
                        return
                except OSError:
                    pass
                time.sleep(0.2)
            exited = self.process.poll() is not None
            self.processes.stop(self.process)
            if not exited:
                break  # alive but not answering: another port will not help
        raise BenchFailure(f"Kinto (gunicorn) did not start: {tail(self.errors)}")

    def create_body(self, indices, record_ids):
        # Client-made ids, as Outpost's uuids: a repeated POST of the same id
        # answers the existing record instead of storing a second one.
        requests = []
        for i in indices:
            data = record_data(i)
            data["id"] = record_ids[i]
            requests.append({"body": {"data": data}})
        return json.dumps({"defaults": {"method": "POST", "path": KINTO_RECORDS[3:]}, "requests": requests},
                          separators=(",", ":"), ensure_ascii=False).encode()

    def update_body(self, ids, text):
        return json.dumps({"defaults": {"method": "PATCH"},
                           "requests": [{"path": f"{KINTO_RECORDS[3:]}/{record_id}", "body": {"data": {"notes": text}}}
                                        for record_id in ids]}, separators=(",", ":"), ensure_ascii=False).encode()

    def push(self, body, count):
        answer, _, seconds = self.client.json("POST", "/v1/batch", body)
        statuses = [response.get("status") for response in answer.get("responses", [])]
        if len(statuses) != count or any(status not in (200, 201) for status in statuses):
            raise BenchFailure(f"Kinto: a batch of {count} got {sum(s in (200, 201) for s in statuses)} stored "
                               f"({sorted(set(statuses))})")
        return seconds

    def page(self, path):
        status, response, payload, seconds = self.client.request("GET", path)
        if status != 200:
            raise BenchFailure(f"Kinto: GET {path.split('?')[0]} answered {status}: {payload[:300]!r}")
        following = response.getheader("Next-Page")
        if following:
            parts = urllib.parse.urlsplit(following)
            following = parts.path + ("?" + parts.query if parts.query else "")
        return json.loads(payload), response.getheader("ETag"), following, seconds

    def list_records(self, query):
        """Follows Next-Page to the end: (records, requests, HTTP seconds, the
        first page's ETag: the collection's time when the listing began)."""
        records, requests, http_seconds, etag = [], 0, 0.0, None
        path = f"{KINTO_RECORDS}?{query}&_limit={self.args.page_size}"
        while path:
            page, tag, path, seconds = self.page(path)
            requests += 1
            http_seconds += seconds
            etag = etag or tag
            records.extend(page["data"])
        if not etag:
            raise BenchFailure("Kinto: a record listing came without an ETag")
        return records, requests, http_seconds, etag.strip('"')

    def download(self):
        # Kinto's documented sync: the whole list in pages, then `_since`
        # the first page's ETag.
        records, requests, http_seconds, self.since = self.list_records("_sort=-last_modified")
        return records, requests, http_seconds

    @staticmethod
    def content(records):
        return [(record["id"], record) for record in records if not record.get("deleted")]

    def changes_since(self):
        records, requests, http_seconds, self.since = self.list_records(f"_since={self.since}&_sort=-last_modified")
        return [record["id"] for record in records], requests, http_seconds


def tail(path, size=800):
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - size))
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return "(no log)"


# ---------------------------------------------------------------- phases


def rotated(servers, run):
    # Each run starts with a different server, so none is always first (or
    # always right after another's load) on a shared machine.
    shift = run % len(servers)
    return servers[shift:] + servers[:shift]


def measure_intake(servers, args, bulk, record_ids, results):
    per_run = args.batches * args.batch_size
    # One batch each, not timed: a fresh server's first pushes (planning,
    # caches, connections) took about twice as long as the later ones.
    for server in servers:
        server.push(server.create_body(range(bulk, bulk + args.batch_size), record_ids), args.batch_size)
    bulk += args.batch_size
    for run in range(args.runs):
        for server in rotated(servers, run):
            first = bulk + run * per_run
            bodies = [server.create_body(range(first + b * args.batch_size, first + (b + 1) * args.batch_size), record_ids)
                      for b in range(args.batches)]
            offset = server.log.offset()
            batch_seconds = [server.push(body, args.batch_size) for body in bodies]
            http_seconds = sum(batch_seconds)
            server_seconds = server.log.seconds(offset, server.push_path, args.batches)
            results[server.name]["intake"].append({"http_seconds": http_seconds, "server_seconds": server_seconds,
                                                   "mutations": per_run, "batch_seconds": batch_seconds})
            log(f"intake run {run + 1}, {server.label}: {per_run / http_seconds:,.0f} mutations/s")


def measure_download(servers, engines, args, results):
    expected_phones = sorted(record_data(index)["phone"] for index in range(args.records))
    for run in range(args.runs):
        for server in rotated(servers, run):
            offset = server.log.offset()
            start = time.perf_counter()
            downloaded, requests, http_seconds = server.download()
            wall = time.perf_counter() - start
            content = server.content(downloaded)
            ids = [record_id for record_id, _ in content]
            if len(ids) != args.records or len(set(ids)) != args.records:
                raise BenchFailure(f"{server.label}: the download brought {len(ids):,} records "
                                   f"({len(set(ids)):,} distinct), not {args.records:,}")
            # The same records on both servers: every generated phone number once.
            phones = sorted(data.get("phone", "") for _, data in content)
            if phones != expected_phones:
                raise BenchFailure(f"{server.label}: the download's records are not the generated ones")
            server_seconds = server.log.seconds(offset, server.download_path, requests)
            server.ids = ids
            results[server.name]["download"].append({"wall_seconds": wall, "http_seconds": http_seconds,
                                                     "server_seconds": server_seconds, "requests": requests})
            log(f"download run {run + 1}, {server.label}: {wall:.2f} s, server {server_seconds:.2f} s, {requests} pages")
        for server in rotated(engines, run):
            offset = server.log.offset()
            records, seconds = server.engine_download(run)
            # The engine also downloads the read-only catalogs every device keeps.
            expected = args.records + server.catalog_count()
            if records != expected:
                raise BenchFailure(f"{server.label}: the engine's download brought {records:,} records, "
                                   f"not {expected:,} ({args.records:,} people and the catalogs)")
            pages = -(-records // 5000)  # the engine's page size (InitialSyncBench)
            server_seconds = server.log.seconds(offset, "/v1/pull", pages)
            results[server.name]["engine"].append({"wall_seconds": seconds, "server_seconds": server_seconds})
            log(f"engine download run {run + 1}, {server.label}: {seconds:.2f} s")


def measure_incremental(servers, args, results):
    changes = args.changes
    for run in range(args.runs):
        for server in rotated(servers, run):
            # Records spread over the whole set, different in each run.
            step = max(1, len(server.ids) // changes)
            chosen = [server.ids[(k * step + run) % len(server.ids)] for k in range(changes)]
            if len(set(chosen)) != changes:
                raise BenchFailure(f"{server.label}: fewer than {changes} distinct records to change")
            server.push(server.update_body(chosen, f"Changed in run {run + 1} of the peer benchmark."), changes)
            offset = server.log.offset()
            ids, requests, http_seconds = server.changes_since()
            if sorted(ids) != sorted(chosen):
                raise BenchFailure(f"{server.label}: the incremental sync brought {len(ids)} changes, "
                                   f"{len(set(ids) & set(chosen))} of the {changes} made")
            server_seconds = server.log.seconds(offset, server.incremental_path, requests)
            results[server.name]["incremental"].append({"http_seconds": http_seconds, "server_seconds": server_seconds,
                                                        "requests": requests})
            log(f"incremental run {run + 1}, {server.label}: {http_seconds * 1000:.1f} ms of HTTP")


def vacuum(url):
    connection = psycopg2.connect(url)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    finally:
        connection.close()


# ---------------------------------------------------------------- report


def median(values):
    return statistics.median(values) if values else float("nan")


def summarize(results, args):
    """One row per figure: Outpost's, Kinto's, and the ratio, which is always
    Outpost's advantage (Kinto's time / Outpost's time, or Outpost's rate /
    Kinto's rate), so above 1 means Outpost is ahead."""
    kinto = results["kinto"]
    rate = lambda run: run["mutations"] / run["http_seconds"]
    measures = [
        # (key, short name, unit, phase, value of one run, Kinto's phase, scale, higher is better, what is measured)
        ("intake", f"push intake, batches of {args.batch_size}", "mutations/s", "intake", rate, "intake", 1, True,
         "mutations / client-observed HTTP time of the push requests (Outpost POST /v1/push, Kinto POST /v1/batch, "
         "one transaction per request on both)"),
        ("download_server", f"initial download of {args.records:,} records, server time", "s", "download",
         lambda run: run["server_seconds"], "download", 1, False,
         f"sum over the {args.page_size}-record pages of each server's own time per request: Outpost's request log "
         "(duration_ms), gunicorn's access log for Kinto (request time, %(D)s)"),
        ("download_wall", "initial download, wall time of the Python client", "s", "download",
         lambda run: run["wall_seconds"], "download", 1, False,
         "the same Python client (http.client, one keep-alive connection) fetching and parsing every page"),
        ("download_http", "initial download, HTTP time of the Python client", "s", "download",
         lambda run: run["http_seconds"], "download", 1, False,
         "the same, without the client's JSON parsing: sending each request to having read its body"),
        ("engine_download", "initial download through Outpost's own engine", "s", "engine",
         lambda run: run["wall_seconds"], "download", 1, False,
         "Outpost's SyncEngine downloading into a fresh SQLite store (outpost _bench-client) beside Kinto's "
         "download into the Python client's memory: the Outpost side does more"),
        ("incremental_http", f"incremental sync of {args.changes} changes, HTTP time", "ms", "incremental",
         lambda run: run["http_seconds"], "incremental", 1000, False,
         "client-observed HTTP time of fetching the changed records after the download (Outpost GET /v1/pull "
         "with the download's cursor, Kinto GET records?_since=<the download's ETag>)"),
        ("incremental_server", f"incremental sync of {args.changes} changes, server time", "ms", "incremental",
         lambda run: run["server_seconds"], "incremental", 1000, False, "the same requests' time in each server's own log"),
    ]
    rows = []
    for key, short, unit, phase, value, kinto_phase, scale, higher_is_better, measured in measures:
        kinto_value = median([value(run) for run in kinto[kinto_phase]]) * scale
        for name, label in (("outpost-sqlite", "SQLite"), ("outpost-postgres", "PostgreSQL")):
            outpost_value = median([value(run) for run in results[name][phase]]) * scale
            if higher_is_better:
                ratio = outpost_value / kinto_value if kinto_value else None
            else:
                ratio = kinto_value / outpost_value if outpost_value else None
            rows.append({"key": f"{key}_{label.lower()}", "name": f"{short}, Outpost on {label}", "short": short,
                         "unit": unit, "outpost": outpost_value, "outpost_database": label, "kinto": kinto_value,
                         "ratio": ratio, "measured": measured})
    return rows


def number(value, unit):
    if value is None or value != value:
        return "-"
    if unit == "mutations/s":
        return f"{value:,.0f}/s"
    if unit == "ms":
        return f"{value:.1f} ms"
    return f"{value:.2f} s"


def print_table(rows, args, meta):
    print()
    print(f"Outpost beside Kinto {meta['kinto_version']} (gunicorn, PostgreSQL {meta['postgres_version']}), "
          f"{args.records:,} records of ~{meta['record_bytes']} bytes of data, medians of {args.runs} alternating runs"
          + (" [--quick: sizes too small for the figures to mean anything]" if args.quick else ""))
    print("Ratio = Outpost's advantage (Kinto's time / Outpost's, or Outpost's rate / Kinto's). "
          f"Load average before/after: {meta['load_average_1min']['before']}/{meta['load_average_1min']['after']} "
          f"on {os.cpu_count()} cores.")
    print()
    headers = ("measure", "Outpost", "Kinto", "ratio")
    table = [(row["name"], number(row["outpost"], row["unit"]), number(row["kinto"], row["unit"]),
              "-" if row["ratio"] is None else f"{row['ratio']:.1f}x") for row in rows]
    widths = [max(len(headers[i]), *(len(line[i]) for line in table)) for i in range(4)]
    print("  ".join(headers[i].ljust(widths[i]) if i == 0 else headers[i].rjust(widths[i]) for i in range(4)))
    print("  ".join("-" * width for width in widths))
    for line in table:
        print("  ".join(line[i].ljust(widths[i]) if i == 0 else line[i].rjust(widths[i]) for i in range(4)))
    print()
    print("What each row measures:")
    seen = set()
    for row in rows:
        if row["measured"] not in seen:
            seen.add(row["measured"])
            print(f"  {row['short']}: {row['measured']}")
    print(f"  data: {meta['bulk_loaded']:,} records loaded directly into each database (outpost seed; SQL into Kinto's "
          f"objects table), {meta['pushed_through_api']:,} pushed through each server's API by the intake runs "
          "(one untimed warm-up batch each first)")
    print()


# ---------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outpost", required=True)
    parser.add_argument("--venv-bin", required=True)
    parser.add_argument("--outpost-postgres", required=True)
    parser.add_argument("--kinto-postgres", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--pid-file")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--records", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--batches", type=int, help="batches per server in each intake run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--page-size", type=int)
    parser.add_argument("--json")
    args = parser.parse_args()

    # The full size is the field platform's (235,613 people); --quick only
    # proves every step works.
    defaults = {"records": 2_000, "batch_size": 100, "batches": 2, "page_size": 500} if args.quick else \
        {"records": 235_613, "batch_size": 500, "batches": 10, "page_size": 5000}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.http_timeout = 30.0 if args.quick else 300.0
    args.start_timeout = 60.0
    args.seed_timeout = 120 if args.quick else 1800
    pushed = (args.runs * args.batches + 1) * args.batch_size  # + the warm-up batch
    bulk = args.records - pushed
    if bulk < 0 or args.batch_size > 500 or not 1 <= args.page_size <= 5000 or args.runs < 1:
        parser.error("need records >= (runs x batches + 1) x batch size, batch size <= 500, page size 1-5000, runs >= 1")
    if args.changes * args.runs > args.records:
        parser.error("need records >= changes x runs")

    processes = Processes(args.pid_file)
    failed = False
    started = time.perf_counter()
    # Other work on the machine moves every figure; the record says how busy it was.
    load_before = os.getloadavg()[0]
    try:
        servers = [
            OutpostServer("outpost-sqlite", "Outpost (SQLite)", os.path.join(args.work, "outpost.sqlite"), args, processes, args.work),
            OutpostServer("outpost-postgres", "Outpost (PostgreSQL)", args.outpost_postgres, args, processes, args.work),
            KintoServer(args, processes, args.work),
        ]
        log(f"{args.records:,} records: {bulk:,} loaded directly into each database, "
            f"{pushed:,} pushed through each server's API in batches of {args.batch_size}")
        for server in servers:
            server.prepare(bulk)
        for url in (args.outpost_postgres, args.kinto_postgres):
            vacuum(url)
        for server in servers[:2]:
            server.start()
        record_ids = {index: str(uuid.uuid4()) for index in range(bulk, args.records)}
        results = {server.name: {"intake": [], "download": [], "engine": [], "incremental": []} for server in servers}
        measure_intake(servers, args, bulk, record_ids, results)
        measure_download(servers, servers[:2], args, results)
        measure_incremental(servers, args, results)

        sample = data_text(0)
        meta = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "records": args.records, "bulk_loaded": bulk, "pushed_through_api": pushed,
            "batch_size": args.batch_size, "batches_per_run": args.batches, "runs": args.runs,
            "page_size": args.page_size, "changes": args.changes, "quick": args.quick,
            "record_bytes": round(sum(len(data_text(i).encode()) for i in range(0, args.records, max(1, args.records // 1000)))
                                  / len(range(0, args.records, max(1, args.records // 1000)))),
            "sample_record": json.loads(sample),
            "kinto_version": package_version("kinto"), "gunicorn_version": package_version("gunicorn"),
            "postgres_version": postgres_version(args.kinto_postgres),
            "machine": f"{os.cpu_count()} cores, {platform.platform()}",
            "seconds": None,
            "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        }
        rows = summarize(results, args)
        meta["seconds"] = round(time.perf_counter() - started, 1)
        print_table(rows, args, meta)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"meta": meta, "results": rows, "runs": results}, handle, indent=2, ensure_ascii=False)
                handle.write("\n")
            log(f"results written to {args.json}")
    except BenchFailure as failure:
        log(f"FAILED: {failure}")
        failed = True
    except (OSError, http.client.HTTPException, psycopg2.Error) as error:
        log(f"FAILED: {type(error).__name__}: {error}")
        failed = True
    finally:
        processes.stop_all()
    return 1 if failed else 0


def package_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "?"


def postgres_version(url):
    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            return cursor.fetchone()[0].split()[0]
    finally:
        connection.close()


if __name__ == "__main__":
    # SIGTERM (the wrapper's trap, a CI timeout) ends through `finally`, so the
    # servers are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Started in the background by the wrapper, this process would ignore
    # Ctrl-C; it must stop its servers then too.
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    sys.exit(main())

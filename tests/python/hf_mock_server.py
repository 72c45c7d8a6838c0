"""A local stand-in for the Hugging Face Hub, for the converter tests (loaderx-cli/tests/convert_hf.rs).

    python hf_mock_server.py FIXTURES_DIR

Serves the repos described by FIXTURES_DIR/hub.json (see
make_hf_fixtures.py) on 127.0.0.1 at a free port, prints `PORT <n>` on its
first stdout line, and exits when its standard input closes (so it never
outlives the test that started it). It implements the endpoints `hf-hub`'s
blocking API calls, the way the Hub answers them:

- `GET /api/datasets/{repo}/revision/{revision}` -> JSON `{"sha", "siblings"}`
  (the revision is URL-encoded, `refs%2Fconvert%2Fparquet`); model repos
  (`/api/models/...`, `/{repo}/resolve/...`) are served the same way;
- `GET /datasets/{repo}/resolve/{revision}/{path}` -> for parquet (LFS)
  files a 302 to an absolute CDN URL carrying `X-Repo-Commit`,
  `X-Linked-Etag` and `X-Linked-Size`; for other files the bytes, with
  `X-Repo-Commit` and `ETag`;
- `GET /_cdn/{sha256}` -> file bytes; both honour `Range: bytes=a-b`
  with `206` and `Content-Range: bytes a-b/size`;
- `GET /_mock/stats` -> JSON request counts, for cache checks.

A repo with `serve_commit` answers downloads with that commit in
`X-Repo-Commit` (a Hub serving other data than pinned). A repo with a
`token` answers 401 (`X-Error-Code: GatedRepo`) unless the
request carries `Authorization: Bearer <token>`. Tokens are never logged.
"""

import hashlib
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

ROOT = sys.argv[1]
with open(os.path.join(ROOT, "hub.json")) as f:
    REPOS = json.load(f)["repos"]

BLOBS = {}  # sha256 -> local path
STATS = {"api": 0, "resolve": 0, "cdn": 0, "unauthorized": 0}
LOCK = threading.Lock()


SHA256 = {}  # path -> hex digest (the files never change while served)


def file_sha256(path):
    known = SHA256.get(path)
    if known is not None:
        return known
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    SHA256[path] = h.hexdigest()
    return SHA256[path]


for repo in REPOS.values():
    for files in repo["commits"].values():
        for local in files.values():
            full = os.path.join(ROOT, local)
            BLOBS.setdefault(file_sha256(full), full)


def resolve(repo, revision):
    if revision in repo["commits"]:
        return revision
    return repo["refs"].get(revision)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if os.environ.get("HF_MOCK_VERBOSE"):
            sys.stderr.write("hf-mock: %s\n" % (fmt % args))

    def count(self, key):
        with LOCK:
            STATS[key] += 1

    def send(self, status, body=b"", headers=(), content_type="application/json", length=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, message, code=None):
        headers = [("X-Error-Code", code)] if code else []
        self.send(status, json.dumps({"error": message}).encode(), headers)

    def authorized(self, repo):
        token = repo.get("token")
        if token is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {token}":
            return True
        self.count("unauthorized")
        self.error(401, "Access to this dataset is restricted; you must be authenticated.", "GatedRepo")
        return False

    def send_file(self, path, headers):
        # Only the bytes asked for are read (files of the stream bench are
        # hundreds of MB).
        size = os.path.getsize(path)
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        start, end = 0, size - 1
        if m:
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) else size - 1
            end = min(end, size - 1)
            if start >= size:
                self.send(416, b"", [("Content-Range", f"bytes */{size}")] + headers)
                return
        data = b""
        if self.command != "HEAD":
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read(end + 1 - start)
        if m:
            self.send(
                206,
                data,
                [("Content-Range", f"bytes {start}-{end}/{size}"), ("Accept-Ranges", "bytes")] + headers,
                "application/octet-stream",
                length=end + 1 - start,
            )
        else:
            self.send(200, data, [("Accept-Ranges", "bytes")] + headers, "application/octet-stream", length=size)

    def do_GET(self):
        raw = urlsplit(self.path).path
        parts = raw.split("/")[1:]
        if parts[:2] == ["_mock", "stats"]:
            with LOCK:
                self.send(200, json.dumps(STATS).encode())
            return
        if parts[:1] == ["_cdn"] and len(parts) == 2:
            self.count("cdn")
            path = BLOBS.get(parts[1])
            if path is None:
                self.error(404, "Entry not found")
            else:
                self.send_file(path, [("ETag", f'"{parts[1]}"')])
            return
        # /api/datasets/{owner}/{name}/revision/{revision}, and /api/models/... for model repos
        if len(parts) >= 6 and parts[0] == "api" and parts[1] in ("datasets", "models") and parts[4] == "revision":
            self.count("api")
            repo_id = f"{unquote(parts[2])}/{unquote(parts[3])}"
            repo = REPOS.get(repo_id)
            if repo is None:
                self.error(401, "Repository not found")  # as the Hub: no existence leak
                return
            if not self.authorized(repo):
                return
            revision = unquote("/".join(parts[5:]))
            sha = resolve(repo, revision)
            if sha is None:
                self.error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
                return
            body = {
                "id": repo_id,
                "sha": sha,
                "private": False,
                "gated": "manual" if repo.get("token") else False,
                "siblings": [{"rfilename": name} for name in sorted(repo["commits"][sha])],
            }
            self.send(200, json.dumps(body).encode())
            return
        # /{owner}/{name}/resolve/{revision}/{path...} (model repos): as datasets'
        if len(parts) >= 5 and parts[2] == "resolve" and parts[0] not in ("datasets", "api", "_cdn", "_mock"):
            parts = ["datasets"] + parts
        # /datasets/{owner}/{name}/resolve/{revision}/{path...}
        if len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve":
            self.count("resolve")
            repo_id = f"{unquote(parts[1])}/{unquote(parts[2])}"
            repo = REPOS.get(repo_id)
            if repo is None:
                self.error(401, "Repository not found")
                return
            if not self.authorized(repo):
                return
            sha = resolve(repo, unquote(parts[4]))
            name = unquote("/".join(parts[5:]))
            files = repo["commits"].get(sha) if sha else None
            if files is None or name not in files:
                self.error(404, "Entry not found", "EntryNotFound")
                return
            local = os.path.join(ROOT, files[name])
            digest = file_sha256(local)
            # `serve_commit` simulates a Hub that serves another commit than asked.
            common = [("X-Repo-Commit", repo.get("serve_commit", sha))]
            if name.endswith(".parquet"):
                host = self.headers.get("Host", "127.0.0.1")
                self.send(
                    302,
                    b"",
                    common
                    + [
                        ("Location", f"http://{host}/_cdn/{digest}"),
                        ("X-Linked-Etag", f'"{digest}"'),
                        ("X-Linked-Size", str(os.path.getsize(local))),
                        ("ETag", f'"{hashlib.sha1(digest.encode()).hexdigest()}"'),
                    ],
                )
            else:
                self.send_file(local, common + [("ETag", f'"{digest[:40]}"')])
            return
        self.error(404, "Not found")

    do_HEAD = do_GET


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # Clients dropping pooled keep-alive connections are not errors.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)

    def watch_stdin():
        try:
            sys.stdin.read()
        finally:
            os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()

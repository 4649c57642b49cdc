#!/usr/bin/env python3
"""Loopback fake of the Hugging Face Hub for the download tests.

Two HTTP/1.1 servers on 127.0.0.1 (ephemeral ports):
  hub  GET/HEAD /{org}/{name}/resolve/{revision}/{filename}
       non-LFS files: 200 + body; LFS files: 302 to the cdn, like the real Hub
       (HEAD answers with what huggingface_hub reads: X-Repo-Commit, ETag,
       X-Linked-Etag and X-Linked-Size, Location, Content-Length).
       GET /api/models/{org}/{name}/revision/{revision}   (id, sha, siblings)
       GET /api/models/{org}/{name}/tree/{revision}[/{path}]  (type, path, size, oid, lfs)
       GET /api/models/{org}/{name}/refs                  (branches, tags, pullRequests)
  cdn  GET/HEAD /blobs/{etag}?repo=...&file=...   (single Range supported, never auth)

Repos: ROOT/hub/<org>/<name>/.hub.json (header-only copies, the rest served as
zeros, generated lazily) and ROOT/golden/<name>/ served as repo golden/<name>,
for every --root given (../shared, and tests/data for the quantized repos),
and --serve ORG/NAME=DIR. A golden or --serve repo also has the tag v1.0 (main's
commit) and refs/pr/1 (a commit of its own with the same files).

When both listen, one JSON line {"hub": port, "cdn": port, "pid": pid} is
written to --ready-file (via F.tmp + rename) and, as "ready {...}", to
--events-fd. Exits on SIGTERM/SIGINT, when the process that started it is gone
(a test killed on its timeout), or by itself after --max-seconds (300).
Fault-injection modes (--mode, repeatable): ignore-range, drop-once,
drop-always, slow, fail-first, redirect-loop, rename, truncate, stall (the
first GET of each blob from the cdn sends --stall-bytes bytes, says
"stalled ETAG BYTES" on --events-fd, and sends the rest after SIGUSR1),
short-small (a file outside LFS sent 100 bytes short, with a Content-Length
that agrees and the ETag of the whole file: what a proxy that cuts bodies does),
cdn-403 (every blob from the cdn refused with 403 and no Hub error code: a
signed link that expired), short-lfs (tokenizer.json served from LFS, as large
ones are, and the cdn sends such a file that is not safetensors 100 bytes
short, with a Content-Length that agrees), size-plus (X-Linked-Size 100
more than the file has), direct (the hub serves an LFS file itself, 200 with
its sha256 as ETag and no X-Linked headers), wrong-range (a Range request to the cdn answered
206 with the whole file, Content-Range "bytes 0-..."), trickle (the cdn sends 1000 bytes, pauses --slow
seconds, and so on: a link that keeps stalling after a little), endless (a GET of a blob from the cdn
answered 200 with no Content-Length: the file, then zeros until the client hangs up), fail-lfs (the
--fail-first failures, with --fail-status, go to the hub's GETs of LFS files only: a download's own GET
rate limited after its HEAD passed), endless-error (every error a GET gets has no Content-Length: its
JSON, then zeros until the client hangs up or --max-seconds), echo-auth (a 401 for credentials the hub does
not take quotes the Authorization header it was sent, as a careless mirror might), slow-body (the cdn sends each
body in its 64 KiB pieces spread over --slow seconds: a download that takes a while, yet never stalls).
--basic USER:PASSWORD: the hub is a mirror behind a password, answering 401 to a request without those Basic
credentials (which then stand for no token; a Bearer token is refused).
--log appends one JSON line per request:
  {"server", "method", "path", "range", "auth", "basic", "status", "bytes"} ("basic": the user name of
  Basic credentials sent, or null).
"""
import argparse
import base64
import binascii
import hashlib
import http.server
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse

CHUNK = 64 * 1024
ZEROS = bytes(CHUNK)
MODES = {"ignore-range", "drop-once", "drop-always", "slow", "fail-first",
         "redirect-loop", "rename", "truncate", "stall", "short-small", "cdn-403", "trickle",
         "wrong-range", "short-lfs", "size-plus", "direct", "endless", "fail-lfs", "endless-error", "echo-auth",
         "slow-body"}
HANGUPS = (BrokenPipeError, ConnectionResetError, socket.timeout)   # a client gone: what tests do


class Blob:
    """One file of a repo: `data` is its stored prefix (the whole file for real
    files, the safetensors header for header-only copies), zeros follow up to
    `size`. `etag` is the sha256 hex (LFS) or git blob sha1 (non-LFS)."""

    def __init__(self, data, size, lfs, etag):
        self.data, self.size, self.lfs, self.etag = data, size, lfs, etag

    def chunks(self, start, end):
        """Yield bytes [start, end) without materialising the zero tail."""
        pos = start
        while pos < end:
            if pos < len(self.data):
                piece = self.data[pos:min(end, len(self.data), pos + CHUNK)]
            else:
                piece = ZEROS[:min(CHUNK, end - pos)]
            pos += len(piece)
            yield piece


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def load_repos(root):
    """Return {"org/name": {"commit", "gated", "files": {name: Blob}}}."""
    repos = {}
    hub = os.path.join(root, "hub")
    for org in sorted(os.listdir(hub)) if os.path.isdir(hub) else []:
        if not os.path.isdir(os.path.join(hub, org)):
            continue                             # README.md
        for name in sorted(os.listdir(os.path.join(hub, org))):
            d = os.path.join(hub, org, name)
            meta_path = os.path.join(d, ".hub.json")
            if not os.path.isfile(meta_path):
                continue
            with open(meta_path) as f:
                meta = json.load(f)
            files = {}
            for fname, e in meta["files"].items():
                if e.get("head"):       # header copy + zeros; fake but stable etag
                    with open(os.path.join(d, e["head"]), "rb") as f:
                        head = f.read()
                    files[fname] = Blob(head, e["size"], bool(e.get("lfs")),
                                        hashlib.sha256(head).hexdigest())
                elif os.path.isfile(os.path.join(d, fname)):
                    with open(os.path.join(d, fname), "rb") as f:
                        data = f.read()
                    lfs = bool(e.get("lfs"))
                    etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
                    files[fname] = Blob(data, len(data), lfs, etag)
            repos[meta.get("repo", org + "/" + name)] = {
                "commit": meta["commit"], "gated": bool(meta.get("gated")), "files": files}
    golden = os.path.join(root, "golden")
    for name in sorted(os.listdir(golden)) if os.path.isdir(golden) else []:
        d = os.path.join(golden, name)
        if os.path.isdir(d):
            add_folder(repos, "golden/" + name, d)
    return repos


def add_folder(repos, repo, d, lfs_tokenizer=False):
    """Serve a plain model folder as `repo`: safetensors as LFS files, the JSON files as git files
    (tokenizer.json in LFS too with lfs_tokenizer)."""
    files = {}
    for fname in sorted(os.listdir(d)):     # a golden/ subfolder is skipped
        p = os.path.join(d, fname)
        lfs = fname.endswith(".safetensors") or (lfs_tokenizer and fname == "tokenizer.json")
        if not os.path.isfile(p) or not (lfs or fname in (
                "config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json")):
            continue
        with open(p, "rb") as f:
            data = f.read()
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
        files[fname] = Blob(data, len(data), lfs, etag)
    commit = hashlib.sha1(repo.encode()).hexdigest()
    repos[repo] = {"commit": commit, "gated": False, "files": files, "tags": {"v1.0": commit},
                   "prs": {"1": hashlib.sha1((repo + "/refs/pr/1").encode()).hexdigest()}}


def resolve_revision(repo, revision):
    """The commit a revision names (a branch, tag, refs/pr/N or commit), or None."""
    if revision in ("main", repo["commit"]) or revision in repo.get("tags", {}):
        return repo["commit"]
    for n, commit in repo.get("prs", {}).items():
        if revision in ("refs/pr/" + n, commit):
            return commit
    return None


def tree_entry(fname, blob):
    """A file as /api/models/.../tree lists it (and, renamed, as a sibling)."""
    e = {"type": "file", "path": fname, "size": blob.size}
    if blob.lfs:
        pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                   % (blob.etag, blob.size)).encode()
        e["oid"] = git_blob_sha1(pointer)
        e["lfs"] = {"oid": blob.etag, "size": blob.size, "pointerSize": len(pointer)}
    else:
        e["oid"] = blob.etag
    return e


def parse_range(header, total):
    """Return (start, end_exclusive), None (serve whole body) or "416"."""
    if not header:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None                              # unsupported: ignore, as RFC 9110 allows
    first, dash, last = spec.strip().partition("-")
    try:
        if not dash:
            return None
        if first == "":                          # suffix range bytes=-n
            n = int(last)
            return "416" if n <= 0 or total == 0 else (max(0, total - n), total)
        a = int(first)
        b = int(last) if last else total - 1
    except ValueError:
        return None
    if a >= total:
        return "416"
    if b < a:
        return None                              # bytes=5-2 is invalid: ignore it
    return a, min(b, total - 1) + 1


class State:
    """Everything the handlers share; counters are guarded by one lock."""

    def __init__(self, args, repos):
        self.args, self.repos = args, repos
        self.modes = set(args.mode)
        if args.fail_first > 0:
            self.modes.add("fail-first")
        self.fail_left = args.fail_first if args.fail_first > 0 else 1
        self.tokens = {t for t in args.tokens.split(",") if t}
        self.by_etag = {b.etag: b for r in repos.values() for b in r["files"].values() if b.lfs}
        self.dropped = set()                     # etags already dropped once
        self.stalled = set()                     # etags already stalled once
        self.release = threading.Event()         # set by SIGUSR1: stalled bodies go on
        self.events = os.fdopen(args.events_fd, "w", buffering=1) if args.events_fd >= 0 else None
        self.lock = threading.Lock()
        self.log = open(args.log, "a") if args.log else None
        self.hub_port = self.cdn_port = 0

    def take_failure(self):
        with self.lock:
            if ("fail-first" in self.modes or "fail-lfs" in self.modes) and self.fail_left > 0:
                self.fail_left -= 1
                return True
            return False

    def should_drop(self, etag):
        if "drop-always" in self.modes:
            return True
        with self.lock:
            if "drop-once" in self.modes and etag not in self.dropped:
                self.dropped.add(etag)
                return True
            return False

    def should_stall(self, etag):
        with self.lock:
            if "stall" in self.modes and etag not in self.stalled:
                self.stalled.add(etag)
                return True
            return False

    def event(self, line):
        if self.events:
            with self.lock:
                self.events.write(line + "\n")

    def write_log(self, rec):
        if self.log:
            with self.lock:
                self.log.write(json.dumps(rec) + "\n")
                self.log.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"                # keep-alive; we always send Content-Length
    server_version = "fakehub/1"
    timeout = 60                                 # idle keep-alive / stalled-reader bound
    state: State = None
    role = ""                                    # "hub" or "cdn", set by subclass

    def log_message(self, *a):                   # keep stderr quiet
        pass

    # -- plumbing -------------------------------------------------------------
    def do_GET(self):
        self.status, self.sent = 0, 0
        try:
            self.route()
        except HANGUPS:
            self.close_connection = True         # client hung up: expected in tests
        self.state.write_log({
            "server": self.role, "method": self.command, "path": self.path,
            "range": self.headers.get("Range"),
            "auth": self.headers.get("Authorization") is not None, "basic": self.basic_user(),
            "status": self.status, "bytes": self.sent})

    def basic_sent(self):
        """The "user:password" of the Basic credentials sent, or None."""
        scheme, _, value = (self.headers.get("Authorization") or "").strip().partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            return base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None

    def basic_user(self):
        """The user name of the Basic credentials sent, or None."""
        sent = self.basic_sent()
        return sent.partition(":")[0] if sent is not None else None

    def credentials(self):
        """(token, None), token the Bearer token sent or None for none; or (None, why) when the hub refuses
        what was sent: a token not in --tokens, or, with --basic, anything but those Basic credentials."""
        auth = self.headers.get("Authorization")
        scheme, _, value = (auth or "").strip().partition(" ")
        value = value.strip()
        echo = ": " + auth.strip() if auth is not None and "echo-auth" in self.state.modes else ""
        if self.state.args.basic:
            if self.basic_sent() != self.state.args.basic:
                return None, "Basic credentials required" + echo
            return None, None
        if auth is None:
            return None, None
        if scheme.lower() != "bearer" or value not in self.state.tokens:
            return None, "Invalid credentials in Authorization header" + echo
        return value, None

    do_HEAD = do_GET

    def start(self, status, headers):
        """Send status line and headers (Content-Length must be among them)."""
        self.status = status
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, str(v))
        if status >= 400:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()

    def body(self, chunks, length, limit=None, stall=None):
        """Stream `chunks` (`length` bytes) for GET; stop after `limit` bytes and
        close abruptly if given. Honors the `slow` mode (headers, sleep, body).
        With `stall` = (etag, n): after n bytes, say so on the events pipe and
        wait for SIGUSR1 before the rest."""
        if self.command == "HEAD" or length == 0:
            return
        if "slow" in self.state.modes:
            time.sleep(self.state.args.slow)
        for piece in chunks:
            if limit is not None and self.sent + len(piece) > limit:
                piece = piece[:limit - self.sent]
            if stall and self.sent < stall[1] <= self.sent + len(piece):
                cut = stall[1] - self.sent
                self.wfile.write(piece[:cut])
                self.wfile.flush()
                self.sent += cut
                piece = piece[cut:]
                self.state.event("stalled %s %d" % (stall[0], self.sent))
                self.state.release.wait(self.state.args.max_seconds)
            if "trickle" in self.state.modes and self.role == "cdn":   # 1000 bytes, a pause of --slow s, ...
                for k in range(0, len(piece), 1000):
                    self.wfile.write(piece[k:k + 1000])
                    self.wfile.flush()
                    time.sleep(self.state.args.slow)
            else:
                self.wfile.write(piece)
                if "slow-body" in self.state.modes and self.role == "cdn":   # each piece its share of --slow s
                    self.wfile.flush()
                    time.sleep(self.state.args.slow * len(piece) / length)
            self.sent += len(piece)
            if limit is not None and self.sent >= limit:
                break
        self.wfile.flush()
        if limit is not None and limit < length:  # drop: short body, then FIN
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def error(self, status, message, code=None, extra=()):
        payload = json.dumps({"error": message}).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", len(payload)),
                   ("X-Error-Message", message)]
        if code:
            headers.append(("X-Error-Code", code))
        if "endless-error" in self.state.modes and self.command == "GET":
            self.start(status, headers[:1] + headers[2:] + list(extra))
            self.wfile.write(payload)
            self.sent += len(payload)
            deadline = time.monotonic() + self.state.args.max_seconds
            while time.monotonic() < deadline:
                self.wfile.write(ZEROS)
                self.sent += len(ZEROS)
            return
        self.start(status, headers + list(extra))
        self.body([payload], len(payload))

    def redirect(self, status, location, extra=()):
        self.start(status, [("Location", location), ("Content-Length", 0)] + list(extra))

    def send_blob(self, blob, headers, allow_range=True, limit_half=False, stall=False):
        """200/206/416 for `blob`, with `headers` added; a half body if limit_half;
        a body that stalls after --stall-bytes if stall."""
        rng = parse_range(self.headers.get("Range"), blob.size) if allow_range else None
        if rng == "416":
            return self.error(416, "Requested range not satisfiable",
                              extra=[("Content-Range", "bytes */%d" % blob.size)])
        if rng and "wrong-range" in self.state.modes:
            rng = (0, blob.size)
        start, end = rng if rng else (0, blob.size)
        h = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes"),
             ("Content-Length", end - start)] + headers
        if rng:
            h.append(("Content-Range", "bytes %d-%d/%d" % (start, end - 1, blob.size)))
        self.start(206 if rng else 200, h)
        at = self.state.args.stall_bytes if self.state.args.stall_bytes > 0 else (end - start) // 2
        self.body(blob.chunks(start, end), end - start,
                  limit=(end - start) // 2 if limit_half else None,
                  stall=(blob.etag, at) if stall and 0 < at < end - start else None)


class HubHandler(Handler):
    role = "hub"

    def route(self):
        st = self.state
        if "fail-lfs" not in st.modes and st.take_failure():
            return self.fail()
        parts = self.path.partition("?")[0].split("/")
        if len(parts) >= 6 and parts[1] == "api" and parts[2] == "models":
            return self.api(parts[3], parts[4], parts[5:])
        # ['', org, name, 'resolve', rev, file...]
        if len(parts) < 6 or parts[3] != "resolve" or not parts[5]:
            return self.error(404, "Not Found")
        org, name, rev_q = parts[1], parts[2], parts[4]
        filename = urllib.parse.unquote("/".join(parts[5:]))
        revision = urllib.parse.unquote(rev_q)
        if "redirect-loop" in st.modes:
            return self.redirect(302, "http://127.0.0.1:%d%s" % (st.hub_port, self.path))
        if "rename" in st.modes and name.endswith("-old"):
            return self.redirect(307, "/%s/%s/resolve/%s/%s" % (
                org, name[:-4], rev_q, "/".join(parts[5:])))

        # Authorization: an invalid token is rejected whatever the repo (and, with --basic, a request without
        # those credentials).
        token, refused = self.credentials()
        if refused:
            return self.error(401, refused)
        repo_id = org + "/" + name
        repo = st.repos.get(repo_id)
        if repo is None:
            return self.error(404, "Repository not found", "RepoNotFound")
        if repo["gated"]:
            msg = ("Access to model %s is restricted. You must have access to it "
                   "and be authenticated to access it. Please log in." % repo_id)
            if token is None:
                return self.error(401, msg, "GatedRepo")
            if token == "hf_noaccess":
                return self.error(403, "Access to model %s is restricted and you are "
                                  "not in the authorized list." % repo_id, "GatedRepo")
        commit = resolve_revision(repo, revision)
        if commit is None:
            return self.error(404, "Invalid rev id: %s" % revision, "RevisionNotFound")
        blob = repo["files"].get(filename)
        if blob is None:
            return self.error(404, "Entry not found", "EntryNotFound",
                              extra=[("X-Repo-Commit", commit)])
        if blob.lfs and "fail-lfs" in st.modes and self.command == "GET" and st.take_failure():
            return self.fail()
        if blob.lfs and "direct" in st.modes:   # no CDN: the file itself, as a plain web server gives it
            return self.send_blob(blob, [("X-Repo-Commit", commit), ("ETag", '"%s"' % blob.etag)])
        if blob.lfs:
            loc = "http://127.0.0.1:%d/blobs/%s?%s" % (
                st.cdn_port, blob.etag,
                urllib.parse.urlencode({"repo": repo_id, "file": filename, "commit": commit}))
            return self.redirect(302, loc, [
                ("X-Repo-Commit", commit), ("X-Linked-Size", blob.size + (100 if "size-plus" in st.modes else 0)),
                ("X-Linked-Etag", '"%s"' % blob.etag), ("ETag", '"%s"' % blob.etag)])
        if "short-small" in st.modes:   # a body cut short whose Content-Length says so, the ETag kept
            cut = blob.data[:max(len(blob.data) - 100, 0)]
            blob = Blob(cut, len(cut), False, blob.etag)
        self.send_blob(blob, [("X-Repo-Commit", commit), ("ETag", '"%s"' % blob.etag)],
                       limit_half="truncate" in st.modes)


    def fail(self):
        status = self.state.args.fail_status
        extra = [("Retry-After", "1")] if status == 429 else []
        return self.error(status, "Injected failure (fail-first)", extra=extra)

    def access(self, repo_id):
        """The repo, or None after answering 401/403/404 as /resolve does."""
        st = self.state
        token, refused = self.credentials()
        if refused:
            return self.error(401, refused)
        repo = st.repos.get(repo_id)
        if repo is None:
            return self.error(404, "Repository not found", "RepoNotFound")
        if repo["gated"] and token in (None, "hf_noaccess"):
            return self.error(401 if token is None else 403, "Access to model %s is restricted" % repo_id,
                              "GatedRepo")
        return repo

    def json(self, value):
        payload = json.dumps(value).encode()
        self.start(200, [("Content-Type", "application/json"), ("Content-Length", len(payload))])
        self.body([payload], len(payload))

    def api(self, org, name, rest):
        """/api/models/{org}/{name}/{revision/REV | tree/REV[/PATH] | refs}: what huggingface_hub reads."""
        repo_id = org + "/" + name
        repo = self.access(repo_id)
        if repo is None:
            return
        kind = rest[0]
        if kind == "refs":
            ref = lambda n, r, c: {"name": n, "ref": r, "targetCommit": c}
            return self.json({
                "branches": [ref("main", "refs/heads/main", repo["commit"])], "converts": [],
                "tags": [ref(t, "refs/tags/" + t, c) for t, c in sorted(repo.get("tags", {}).items())],
                "pullRequests": [ref("refs/pr/" + n, "refs/pr/" + n, c) for n, c in sorted(repo.get("prs", {}).items())]})
        if kind not in ("revision", "tree") or len(rest) < 2:
            return self.error(404, "Not Found")
        commit = resolve_revision(repo, urllib.parse.unquote(rest[1]))
        if commit is None:
            return self.error(404, "Invalid rev id: %s" % urllib.parse.unquote(rest[1]), "RevisionNotFound")
        entries = [tree_entry(f, b) for f, b in sorted(repo["files"].items())]
        if kind == "revision":
            siblings = [{"rfilename": e["path"], "size": e["size"], "blobId": e["oid"],
                         **({"lfs": {"sha256": e["lfs"]["oid"], "size": e["size"],
                                     "pointerSize": e["lfs"]["pointerSize"]}} if "lfs" in e else {})}
                        for e in entries]
            return self.json({"id": repo_id, "sha": commit, "private": False, "gated": repo["gated"],
                              "siblings": siblings})
        prefix = urllib.parse.unquote("/".join(rest[2:]))
        return self.json([e for e in entries if not prefix or e["path"].startswith(prefix.rstrip("/") + "/")
                          or e["path"] == prefix])


class CdnHandler(Handler):
    role = "cdn"

    def route(self):
        st = self.state
        path, _, query = self.path.partition("?")
        parts = path.split("/")
        blob = st.by_etag.get(parts[2]) if len(parts) == 3 and parts[1] == "blobs" else None
        q = urllib.parse.parse_qs(query)
        if q.get("repo") and q.get("file"):     # prefer the self-describing query
            repo = st.repos.get(q["repo"][0])
            cand = repo["files"].get(q["file"][0]) if repo else None
            if cand is not None and cand.lfs and (blob is None or cand.etag == blob.etag):
                blob = cand
        if blob is None:
            return self.error(404, "Blob not found")
        if "cdn-403" in st.modes:                # as a storage host answers a signed link that expired
            return self.error(403, "Request has expired")
        if "short-lfs" in st.modes and not q.get("file", [""])[0].endswith(".safetensors"):
            cut = blob.data[:max(len(blob.data) - 100, 0)]   # what a proxy that cuts bodies sends
            blob = Blob(cut, len(cut), True, blob.etag)
        if "endless" in st.modes and self.command == "GET":   # the file, then zeros without end
            self.close_connection = True
            self.start(200, [("Content-Type", "application/octet-stream"), ("Connection", "close")])
            deadline = time.monotonic() + st.args.max_seconds
            for piece in blob.chunks(0, blob.size):
                self.wfile.write(piece)
                self.sent += len(piece)
            while time.monotonic() < deadline:
                self.wfile.write(ZEROS)
                self.sent += len(ZEROS)
            return
        drop = self.command == "GET" and st.should_drop(blob.etag)
        stall = self.command == "GET" and st.should_stall(blob.etag)
        self.send_blob(blob, [("ETag", '"%s"' % blob.etag)],
                       allow_range="ignore-range" not in st.modes, limit_half=drop, stall=stall)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128                     # many parallel test clients

    def handle_error(self, request, client_address):
        """A client that hangs up between requests is what tests do; anything else is printed."""
        if not isinstance(sys.exc_info()[1], HANGUPS):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, action="append",
                    help="folder holding hub/ and golden/ (repeatable: every root's repos are served)")
    ap.add_argument("--ready-file", help="where to write the ports once listening (or use --events-fd)")
    ap.add_argument("--log")
    ap.add_argument("--mode", action="append", default=[], choices=sorted(MODES))
    ap.add_argument("--fail-first", type=int, default=0,
                    help="N hub requests fail (implies --mode fail-first; that mode alone: 1)")
    ap.add_argument("--fail-status", type=int, default=503)
    ap.add_argument("--slow", type=float, default=5.0, help="seconds, for --mode slow, trickle and slow-body")
    ap.add_argument("--tokens", default="hf_good,hf_noaccess")
    ap.add_argument("--basic", metavar="USER:PASSWORD",
                    help="answer the hub's requests only with these Basic credentials (a mirror behind a password)")
    ap.add_argument("--max-seconds", type=float, default=300.0, help="safety bound")
    ap.add_argument("--serve", action="append", default=[], metavar="ORG/NAME=DIR",
                    help="also serve model folder DIR as repo ORG/NAME")
    ap.add_argument("--events-fd", type=int, default=-1,
                    help="write 'ready {...}' and 'stalled ETAG BYTES' lines to this inherited descriptor")
    ap.add_argument("--stall-bytes", type=int, default=0, help="for --mode stall (0: half the body)")
    args = ap.parse_args()

    repos = {}
    for root in args.root:
        repos.update(load_repos(root))
    for spec in args.serve:
        repo, _, folder = spec.partition("=")
        add_folder(repos, repo, folder, lfs_tokenizer="short-lfs" in args.mode)
    state = State(args, repos)
    handlers = {r: type(c.__name__, (c,), {"state": state}) for r, c in
                (("hub", HubHandler), ("cdn", CdnHandler))}
    hub = Server(("127.0.0.1", 0), handlers["hub"])
    cdn = Server(("127.0.0.1", 0), handlers["cdn"])
    state.hub_port, state.cdn_port = hub.server_address[1], cdn.server_address[1]
    for s in (hub, cdn):                         # a short poll: a stop takes milliseconds, not half a second
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    # A handler runs in the main thread between two of its bytecodes, so it takes no lock the main
    # thread may hold: Event.set() there could wait forever on the lock of an Event.wait() it
    # interrupted (a stop that never ended, seen once in CI). It only appends; the loop polls.
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    signal.signal(signal.SIGUSR1, lambda *_: state.release.set())   # the main thread never holds its lock

    ready = json.dumps({"hub": state.hub_port, "cdn": state.cdn_port, "pid": os.getpid()})
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(ready + "\n")
        os.rename(tmp, args.ready_file)
    state.event("ready " + ready)

    deadline, parent = time.monotonic() + args.max_seconds, os.getppid()
    while not stopping and time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.02)                         # a handler runs as its signal arrives; seen within 20 ms
    for s in (hub, cdn):
        s.shutdown()
        s.server_close()
    if state.log:
        state.log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

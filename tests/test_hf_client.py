#!/usr/bin/env python3
"""gen-model beside the real huggingface_hub client (../shared/thirdparty) on one cache.

Over the tests' fake Hub (fakehub.py), as a user meets them: each client reads
the other's cache offline with no request; rounds of downloads by both at
once; a kill -9 (or Ctrl-C) of either mid-file, then the other finishing it
with the right Range; a .incomplete that has every byte; a download waited for
while the other holds its lock; tags and refs/pr/1. After every gen-model
command, scan_cache_dir has no warning and verify_repo_checksums (what
`hf cache verify` runs) finds no mismatch and no extra file.

Synchronisation is by pipes (the fake Hub's "stalled" events, gen-model's
stderr) and by the size of a partial file the test waits for, never by sleeping
a guessed time. Run by ctest with GM_GEN_MODEL, GM_SHARED_DIR and GM_HF_CLIENT
(the client's src/ folder) set; needs Debian's python3-httpx, -filelock, -tqdm,
-yaml, -requests, -packaging, -fsspec (README).
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.environ.get("GM_GEN_MODEL", "")
SHARED = os.environ.get("GM_SHARED_DIR", os.path.join(HERE, "..", "..", "shared"))
CLIENT_SRC = os.environ.get("GM_HF_CLIENT", os.path.join(SHARED, "thirdparty", "huggingface_hub-1.3.7", "src"))
MIB = 1 << 20
BIG = 11 * MIB + 123                             # past the client's 10 MiB pieces
WORK = client = None


def setUpModule():
    global WORK, client
    WORK = tempfile.mkdtemp(prefix="gm-hf-")
    # a repo whose one file is larger than the pieces huggingface_hub writes (10 MiB)
    big = os.path.join(WORK, "big")
    os.mkdir(big)
    shutil.copy(os.path.join(SHARED, "golden", "llama_untied", "config.json"), big)
    header = json.dumps({"w": {"dtype": "U8", "shape": [BIG], "data_offsets": [0, BIG]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(os.path.join(big, "model.safetensors"), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + os.urandom(BIG))
    client = Client()


def tearDownModule():
    client.close()
    shutil.rmtree(WORK, ignore_errors=True)


def big_sha():
    with open(os.path.join(WORK, "big", "model.safetensors"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Client:
    """The helper process that runs huggingface_hub (hf_client.py)."""

    def __init__(self):
        env = dict(os.environ, PYTHONPATH=CLIENT_SRC, HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1",
                   HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=os.path.join(WORK, "unused-hf-home"))
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "hf_client.py")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env, text=True, bufsize=1)

    def call(self, op, **a):
        self.p.stdin.write(json.dumps(dict(a, op=op)) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError("the huggingface_hub helper died (its traceback is above)")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError("huggingface_hub %s %s: %s" % (op, a, answer["error"]))
        return answer["ok"]

    def close(self):
        self.p.stdin.close()
        self.p.wait()
        self.p.stdout.close()


class FakeHub:
    """fakehub.py with its events on a pipe: 'ready {...}', then 'stalled ETAG BYTES' lines."""
    n = 0

    def __init__(self, *extra):
        FakeHub.n += 1
        self.log = os.path.join(WORK, "hub.%d.log" % FakeHub.n)
        r, w = os.pipe()
        with open(os.path.join(WORK, "hub.%d.err" % FakeHub.n), "w") as err:
            self.p = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "fakehub.py"), "--root", SHARED, "--events-fd", str(w),
                 "--log", self.log, "--max-seconds", "120", "--serve", "test/big=" + os.path.join(WORK, "big"),
                 *extra], pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        os.close(w)
        self.events = os.fdopen(r)
        ready = self.wait_event("ready ")
        self.endpoint = "http://127.0.0.1:%d" % json.loads(ready[6:])["hub"]

    def wait_event(self, prefix):
        for line in self.events:
            if line.startswith(prefix):
                return line.strip()
        raise AssertionError("the fake Hub ended before '%s'" % prefix)

    def release(self):
        os.kill(self.p.pid, signal.SIGUSR1)

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def settled(self, quiet=0.25, deadline=10.0):
        """How many requests the log holds once it has stopped growing: the server logs a request after its
        response, so a client can return before its last request is logged (a HEAD of python's came in late)."""
        n, since, end = len(self.requests()), time.monotonic(), time.monotonic() + deadline
        while time.monotonic() - since < quiet and time.monotonic() < end:
            time.sleep(0.05)
            m = len(self.requests())
            if m != n:
                n, since = m, time.monotonic()
        return n

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:      # never left running: it would hold the test's output pipe
            self.p.kill()
            self.p.wait()
            raise AssertionError("the fake Hub did not stop on SIGTERM within 10 s")
        self.events.close()


def wait_size(path, size, deadline=30.0):
    """Wait for a file another process writes to reach size bytes (its writer signals nothing else)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) >= size:
            return os.path.getsize(path)
        time.sleep(0.005)
    raise AssertionError("%s did not reach %d bytes" % (path, size))


class Case(unittest.TestCase):
    """One cache (HF_HOME=<work>/<test>/hf) and one fake Hub per test."""
    hub_args = ()

    def setUp(self):
        self.dir = os.path.join(WORK, self.id().rsplit(".", 1)[-1])
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "hf")
        self.cache = os.path.join(self.home, "hub")
        self.hub = FakeHub(*self.hub_args)

    def tearDown(self):
        self.hub.stop()

    def env(self, offline=False, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
        env.update(HF_HOME=self.home, HF_ENDPOINT=self.hub.endpoint, GM_HUB_RETRY_MS="20", **extra)
        if offline:
            env["HF_HUB_OFFLINE"] = "1"
        return env

    def gen(self, *args, offline=False, ok=True, **extra):
        """gen-model ARGS; with ok, it must succeed, and the cache must then be clean."""
        r = subprocess.run([GEN, *args], env=self.env(offline, **extra), capture_output=True, text=True,
                           timeout=120)
        if ok:
            self.assertEqual(r.returncode, 0, "gen-model %s: %s" % (" ".join(args), r.stderr))
        return r

    def gen_bg(self, *args, **extra):
        return subprocess.Popen([GEN, *args], env=self.env(**extra), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def py(self, op, **a):
        return client.call(op, cache=self.cache, endpoint=self.hub.endpoint, **a)

    def assert_clean(self, repo, revision=None, complete=True):
        """What every other tool sees in the cache: no warning, no extra file, no mismatch, nothing half-done."""
        scan = self.py("scan")
        self.assertEqual(scan["warnings"], [], "scan_cache_dir warns")
        v = self.py("verify", repo=repo, revision=revision)
        self.assertEqual(v["extra"], [], "files of gen-model's own in the snapshot")
        self.assertEqual(v["mismatches"], [], "a file differs from the Hub's")
        if complete:
            self.assertEqual(v["missing"], [], "a file of the repo is missing")
        left = [os.path.join(d, f) for d, _, fs in os.walk(self.cache) for f in fs
                if f.endswith((".incomplete", ".tmp"))]
        self.assertEqual(left, [], "partial files left")
        return v

    def blob(self, repo, etag):
        return os.path.join(self.cache, "models--" + repo.replace("/", "--"), "blobs", etag)

    def asked(self, since=0):
        """Requests to the fake Hub since `since`, but for the trees the checks' verifications read."""
        return [r for r in self.hub.requests()[since:] if "/tree/" not in r["path"]]

    def resumed(self, since):
        """The Ranges of the ranged GETs from the cdn since `since` (the stalled one is logged when it ends)."""
        return [r["range"] for r in self.cdn_gets(since) if r["range"]]

    def cdn_gets(self, since=0):
        return [r for r in self.hub.requests()[since:] if r["server"] == "cdn" and r["method"] == "GET"]


class EachReadsTheOthersCache(Case):
    def test_gen_model_reads_a_cache_the_python_client_filled_offline_with_no_request(self):
        repo = "golden/llama_untied_sharded"
        snap = self.py("snapshot", repo=repo)
        before = self.hub.settled()
        r = self.gen("download", repo, offline=True)
        self.assertEqual(r.stdout.strip(), snap)
        self.assert_clean(repo)
        out = os.path.join(self.dir, "models")
        self.gen(repo, "--out", out, offline=True)
        self.assert_clean(repo)
        self.assertEqual(self.asked(before), [], "gen-model asked the Hub")
        self.assertEqual(os.listdir(out), ["llama_untied_sharded"])

    def test_the_python_client_reads_a_cache_gen_model_filled_offline_with_no_request(self):
        repo = "golden/llama_untied_sharded"
        snap = self.gen("download", repo).stdout.strip()
        self.assert_clean(repo)
        self.gen(repo, "--out", os.path.join(self.dir, "models"))
        self.assert_clean(repo)
        before = self.hub.settled()
        self.assertEqual(self.py("snapshot", repo=repo, offline=True), snap)
        for f in ("config.json", "model.safetensors.index.json", "model-00002-of-00003.safetensors"):
            self.assertEqual(self.py("file", repo=repo, file=f, offline=True), os.path.join(snap, f))
        self.assertEqual(self.asked(before), [])

    def test_a_scaffold_leaves_only_repo_files_even_in_a_cache_an_earlier_version_wrote(self):
        repo = "golden/qwen2_tied"
        self.gen(repo, "--out", os.path.join(self.dir, "models"))
        v = self.assert_clean(repo, complete=False)
        self.assertEqual(v["missing"], ["model.safetensors"])    # only its header was read
        scan = self.py("scan")["repos"][repo]
        self.assertEqual(scan["nb_files"], 1)
        # as earlier versions left a snapshot: the header as a link to a blob of its own
        snap = self.gen("download", repo, offline=True, ok=False)   # the weights are not there ...
        self.assertEqual(snap.returncode, 1, snap.stderr)            # ... and offline says so in one line
        self.assertEqual(len(snap.stderr.splitlines()), 1, snap.stderr)
        commit = list(self.py("scan")["repos"][repo]["revisions"])[0]
        heads = os.path.join(self.home, "assets", "gen-model", "golden--qwen2_tied", "headers", commit)
        head = os.path.join(heads, "model.safetensors.head")
        with open(head, "rb") as f:
            data = f.read()
        blob = hashlib.sha256(data).hexdigest()
        os.rename(head, self.blob(repo, blob))
        snapdir = os.path.join(self.cache, "models--golden--qwen2_tied", "snapshots", commit)
        os.symlink("../../blobs/" + blob, os.path.join(snapdir, "model.safetensors.head"))
        self.assertEqual(self.py("verify", repo=repo)["extra"], ["model.safetensors.head"])
        self.gen("download", repo)
        self.assert_clean(repo)
        self.assertFalse(os.path.exists(self.blob(repo, blob)), "the old header's blob is left")
        self.assertTrue(os.path.exists(head))


class Rounds(Case):
    def test_rounds_of_downloads_by_both_and_a_scaffold_at_once_all_succeed_with_every_blob_right(self):
        repo = "golden/llama_untied_sharded"
        for round in range(5):
            shutil.rmtree(self.home, ignore_errors=True)
            out = os.path.join(self.dir, "models%d" % round)
            pids = self.py("spawn", n=3, call={"op": "snapshot", "repo": repo, "cache": self.cache,
                                                "endpoint": self.hub.endpoint})
            gens = [self.gen_bg("download", repo) for _ in range(3)] + [self.gen_bg(repo, "--out", out)]
            results = [(p.wait(), *p.communicate()) for p in gens]
            self.assertEqual(self.py("wait", pids=pids), [0, 0, 0], "round %d: a Python download failed" % round)
            for rc, stdout, stderr in results:
                self.assertEqual(rc, 0, "round %d: %s" % (round, stderr))
            snap = self.py("snapshot", repo=repo, offline=True)
            self.assertEqual({r[1].strip() for r in results[:3]}, {snap})
            self.assert_clean(repo)
            self.assertEqual(os.listdir(out), ["llama_untied_sharded"])


class KilledMidFile(Case):
    hub_args = ("--mode", "stall", "--stall-bytes", str(5 * MIB))

    def test_gen_model_killed_mid_file_is_finished_by_the_python_client_with_the_right_range(self):
        p = self.gen_bg("download", "test/big")
        etag = self.hub.wait_event("stalled").split()[1]
        part = self.blob("test/big", etag) + ".incomplete"
        wait_size(part, 5 * MIB)
        p.kill()
        p.wait()
        self.hub.release()
        since = self.hub.settled()
        path = self.py("file", repo="test/big", file="model.safetensors")
        self.assertEqual(os.path.realpath(path), self.blob("test/big", big_sha()))
        self.assertEqual(self.resumed(since), ["bytes=%d-" % (5 * MIB)])
        self.assert_clean("test/big")

    def test_ctrl_c_mid_file_stops_in_one_line_and_leaves_what_the_python_client_resumes(self):
        p = self.gen_bg("download", "test/big")
        etag = self.hub.wait_event("stalled").split()[1]
        part = self.blob("test/big", etag) + ".incomplete"
        wait_size(part, 5 * MIB)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 130, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        size = os.path.getsize(os.path.join(WORK, "big", "model.safetensors"))
        self.assertIn("interrupted: model.safetensors stays in %s (%d of %d bytes)" % (part, 5 * MIB, size), err)
        self.assertEqual(os.path.getsize(part), 5 * MIB)
        self.hub.release()
        since = self.hub.settled()
        self.py("file", repo="test/big", file="model.safetensors")
        self.assertEqual(self.resumed(since), ["bytes=%d-" % (5 * MIB)])
        self.assert_clean("test/big")


class PythonKilledMidFile(Case):
    hub_args = ("--mode", "stall", "--stall-bytes", str(10 * MIB + 64 * 1024))

    def test_the_python_client_killed_mid_file_is_finished_by_gen_model_with_the_right_range(self):
        call = {"op": "file", "repo": "test/big", "file": "model.safetensors", "cache": self.cache,
                "endpoint": self.hub.endpoint}
        pid = self.py("spawn", call=call)[0]
        etag = self.hub.wait_event("stalled").split()[1]
        wait_size(self.blob("test/big", etag) + ".incomplete", 10 * MIB)   # its first 10 MiB piece
        os.kill(pid, signal.SIGKILL)
        self.assertEqual(self.py("wait", pids=[pid]), [-9])
        self.hub.release()
        since = self.hub.settled()
        r = self.gen("download", "test/big")
        self.assertEqual(self.resumed(since), ["bytes=%d-" % (10 * MIB)])
        self.assertEqual(os.path.realpath(os.path.join(r.stdout.strip(), "model.safetensors")),
                         self.blob("test/big", big_sha()))
        self.assert_clean("test/big")


class WaitsForTheOther(Case):
    hub_args = ("--mode", "stall", "--stall-bytes", str(64 * 1024))

    def test_a_download_the_python_client_holds_is_waited_for_and_ctrl_c_or_sigterm_ends_the_wait(self):
        # the Python client holds the blob's lock; its .incomplete stays empty (it writes in 10 MiB pieces)
        call = {"op": "file", "repo": "test/big", "file": "model.safetensors", "cache": self.cache,
                "endpoint": self.hub.endpoint}
        pid = self.py("spawn", call=call)[0]
        self.hub.wait_event("stalled")
        quit, stay = self.gen_bg("download", "test/big"), self.gen_bg("download", "test/big")
        line = quit.stderr.readline()
        self.assertIn("waiting for the blob %s (model.safetensors)" % big_sha(), line)
        self.assertIn("it has written 0.0 of 11.5 MB so far", line)
        quit.send_signal(signal.SIGTERM)
        out, err = quit.communicate(timeout=20)
        self.assertEqual(quit.returncode, 130, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("interrupted while waiting for the blob", err)
        self.assertIn("waiting for the blob", stay.stderr.readline())
        # no GM_LOCK_TIMEOUT: a held lock is a live holder, however long its file stays the same size
        self.hub.release()
        self.assertEqual(self.py("wait", pids=[pid]), [0])
        out, err = stay.communicate(timeout=60)
        self.assertEqual(stay.returncode, 0, err)
        self.assertEqual(len(self.cdn_gets()), 1, "the blob was fetched again")
        self.assert_clean("test/big")


class CompleteIncomplete(Case):
    def complete_incomplete(self, repo):
        """As a client killed after the last byte and before its move leaves it."""
        snap = self.py("snapshot", repo=repo, offline=True)
        link = os.path.join(snap, "model.safetensors")
        blob = os.path.realpath(link)
        os.rename(blob, blob + ".incomplete")
        os.unlink(link)
        return self.hub.settled()

    def test_each_client_finishes_the_others_complete_partial_file_without_fetching_it(self):
        repo = "golden/mistral_untied"
        self.py("snapshot", repo=repo)
        since = self.complete_incomplete(repo)
        self.gen("download", repo)
        self.assertEqual(self.cdn_gets(since), [])
        self.assert_clean(repo)
        repo = "golden/qwen2_tied"
        self.gen("download", repo)
        since = self.complete_incomplete(repo)
        self.py("file", repo=repo, file="model.safetensors")
        self.assertEqual(self.cdn_gets(since), [])
        self.assert_clean(repo)


class Revisions(Case):
    def test_tags_and_pull_request_refs_agree_between_the_clients(self):
        repo = "golden/qwen3_tied"
        rdir = os.path.join(self.cache, "models--golden--qwen3_tied")
        pr = hashlib.sha1((repo + "/refs/pr/1").encode()).hexdigest()
        main = hashlib.sha1(repo.encode()).hexdigest()
        snap = self.gen("download", repo, "--revision", "refs/pr/1").stdout.strip()
        self.assertEqual(os.path.basename(snap), pr)
        self.assert_clean(repo, revision="refs/pr/1")
        self.gen(repo, "--revision", "v1.0", "--out", os.path.join(self.dir, "models"))
        self.assert_clean(repo, revision="v1.0", complete=False)
        for ref, commit in (("refs/pr/1", pr), ("v1.0", main)):
            with open(os.path.join(rdir, "refs", ref)) as f:
                self.assertEqual(f.read(), commit)
        self.assertEqual(self.py("snapshot", repo=repo, revision="refs/pr/1", offline=True), snap)
        revs = self.py("scan")["repos"][repo]["revisions"]
        self.assertEqual(revs[pr]["refs"], ["refs/pr/1"])
        self.assertEqual(revs[main]["refs"], ["v1.0"])
        # and the other way round, offline
        shutil.rmtree(self.home)
        for rev, commit in (("v1.0", main), ("refs/pr/1", pr)):
            self.py("snapshot", repo=repo, revision=rev)
            before = self.hub.settled()
            r = self.gen("download", repo, "--revision", rev, offline=True)
            self.assertEqual(os.path.basename(r.stdout.strip()), commit)
            self.assertEqual(self.asked(before), [])
            self.assert_clean(repo, revision=rev)


class TheCacheIsWhereTheClientPutsIt(Case):
    def test_every_spelling_of_the_cache_place_is_read_as_the_python_client_reads_it(self):
        """~, $VAR and ${VAR} in HF_HOME and HF_HUB_CACHE, and the older HUGGINGFACE_HUB_CACHE: the folder
        huggingface_hub's constants give (asked of the real client in a process with that environment)."""
        home = os.path.join(self.dir, "home")
        os.makedirs(home)
        spellings = [{"HF_HOME": "~/hf1"}, {"HF_HOME": "$HOME/hf2"}, {"HF_HOME": "${HOME}/hf3"},
                     {"HF_HUB_CACHE": "~/hub4"}, {"HUGGINGFACE_HUB_CACHE": os.path.join(self.dir, "legacy")},
                     {"HF_HUB_CACHE": "$HOME/hub6", "HUGGINGFACE_HUB_CACHE": os.path.join(self.dir, "unused")}]
        for extra in spellings:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE", "HUGGINGFACE_"))}
            env.update(HOME=home, HF_ENDPOINT=self.hub.endpoint, GM_HUB_RETRY_MS="20", PYTHONPATH=CLIENT_SRC, **extra)
            env.pop("XDG_CACHE_HOME", None)
            want = subprocess.run([sys.executable, "-c", "import huggingface_hub.constants as c; print(c.HF_HUB_CACHE)"],
                                  env=env, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
            self.assertTrue(os.path.isabs(want), want)
            r = subprocess.run([GEN, "download", "golden/qwen2_tied"], env=env, capture_output=True, text=True,
                               timeout=120, cwd=self.dir)
            self.assertEqual(r.returncode, 0, "%s: %s" % (extra, r.stderr))
            self.assertTrue(r.stdout.strip().startswith(os.path.join(want, "models--golden--qwen2_tied", "snapshots")),
                            "%s: gen-model used %s, huggingface_hub %s" % (extra, r.stdout.strip(), want))

    def test_the_token_file_and_the_assets_folder_are_where_the_python_client_puts_them(self):
        """HF_TOKEN_PATH and HF_ASSETS_CACHE with ~ and $VAR, and the default token path under an HF_HOME that is
        itself a variable: the token reaches a gated repo, the header copies go to the client's assets folder."""
        home = os.path.join(self.dir, "home")
        os.makedirs(home)
        spellings = [{"HF_HOME": "$HFH", "HFH": "$HOME/hf1"},
                     {"HF_HOME": "~/hf2", "HF_TOKEN_PATH": "~/secrets/token", "HF_ASSETS_CACHE": "${HOME}/assets3"}]
        for i, extra in enumerate(spellings):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE", "HUGGINGFACE_"))}
            env.update(HOME=home, HF_ENDPOINT=self.hub.endpoint, GM_HUB_RETRY_MS="20", PYTHONPATH=CLIENT_SRC, **extra)
            env.pop("XDG_CACHE_HOME", None)
            code = "import huggingface_hub.constants as c; print(c.HF_TOKEN_PATH); print(c.HF_ASSETS_CACHE)"
            token_path, assets = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                                timeout=60, check=True).stdout.split()
            self.assertTrue(os.path.isabs(token_path) and os.path.isabs(assets), (token_path, assets))
            os.makedirs(os.path.dirname(token_path), exist_ok=True)
            with open(token_path, "w") as f:
                f.write("hf_good\n")
            out = os.path.join(self.dir, "models%d" % i)
            r = subprocess.run([GEN, "meta-llama/Llama-3.2-1B", "--out", out], env=env, capture_output=True,
                               text=True, timeout=120, cwd=self.dir)
            self.assertEqual(r.returncode, 0, "%s: %s" % (extra, r.stderr))
            heads = os.path.join(assets, "gen-model", "meta-llama--Llama-3.2-1B", "headers")
            self.assertTrue(os.path.isdir(heads), "%s: no header copies in %s: %s" % (extra, heads, os.listdir(home)))
            os.remove(token_path)


if __name__ == "__main__":
    if not os.access(GEN, os.X_OK):
        sys.exit("test_hf_client.py: set GM_GEN_MODEL to the gen-model binary")
    unittest.main(verbosity=2)

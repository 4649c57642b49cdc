#!/usr/bin/env python3
"""The real huggingface_hub client, for test_hf_client.py.

One process for the whole suite, so the client is imported once: each line on
stdin is a JSON command {"op": ..., ...}, each answer one JSON line on stdout,
{"ok": value} or {"error": "Type: message"}. The cache, the endpoint and
offline mode are arguments of each call (cache_dir, endpoint,
local_files_only), never the environment the client reads at import, so one
process serves every cache and every fake Hub of the suite.

  snapshot  repo [revision]             snapshot_download -> the snapshot folder
  file      repo file [revision]        hf_hub_download -> the file's path
  verify    repo [revision]             verify_repo_checksums -> checked, mismatches, missing, extra
  scan                                  scan_cache_dir -> warnings, and per repo its files, revisions, refs
  spawn     n, call {op, ...}           fork n processes that each run call; their pids at once
  wait      pids                        their exit statuses (0: the call succeeded; -9: SIGKILL)
Every command but spawn and wait takes cache, endpoint and offline.
"""
import json
import os
import sys
import traceback

from huggingface_hub import HfApi, hf_hub_download, scan_cache_dir, snapshot_download
from huggingface_hub.utils import _http


def run(a):
    op, cache, endpoint, offline = a["op"], a.get("cache"), a.get("endpoint"), a.get("offline", False)
    if op == "snapshot":
        return snapshot_download(a["repo"], revision=a.get("revision"), cache_dir=cache, endpoint=endpoint,
                                 local_files_only=offline)
    if op == "file":
        return hf_hub_download(a["repo"], a["file"], revision=a.get("revision"), cache_dir=cache,
                               endpoint=endpoint, local_files_only=offline)
    if op == "verify":
        v = HfApi(endpoint=endpoint).verify_repo_checksums(a["repo"], revision=a.get("revision"), cache_dir=cache)
        return {"checked": v.checked_count, "mismatches": v.mismatches, "missing": v.missing_paths,
                "extra": v.extra_paths, "revision": v.revision}
    if op == "scan":
        info = scan_cache_dir(cache)
        return {"warnings": [str(w) for w in info.warnings],
                "repos": {r.repo_id: {"nb_files": r.nb_files,
                                      "revisions": {v.commit_hash: {"files": sorted(f.file_name for f in v.files),
                                                                    "refs": sorted(v.refs)}
                                                    for v in r.revisions}}
                          for r in info.repos}}
    if op == "spawn":
        pids = []
        for _ in range(a.get("n", 1)):
            pid = os.fork()
            if pid == 0:
                _http._GLOBAL_CLIENT = None      # the parent's connections are not the child's
                code = 1
                try:
                    run(a["call"])
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stderr.flush()
                    os._exit(code)
            pids.append(pid)
        return pids
    if op == "wait":
        out = []
        for pid in a["pids"]:
            _, status = os.waitpid(pid, 0)
            out.append(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
        return out
    raise ValueError("unknown op %r" % op)


def main():
    for line in sys.stdin:
        try:
            answer = {"ok": run(json.loads(line))}
        except Exception as e:                   # the caller's assertion shows it
            answer = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

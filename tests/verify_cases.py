#!/usr/bin/python3
"""Candidates for phase0 verify, made from a reference bundle with numpy, and
the verdict verify's rules give them, computed here independently of the C
code (docs/verify.md).

  verify_cases.py make REF OUT MODE [ARG]   OUT: a copy of REF, perturbed
      swap A,B        layers A and B exchanged
      noise S         Gaussian noise of S times each layer's std on layers and final_norm
      inside STEP     at STEP the candidate picks the reference's 2nd token; its top-5 holds the 1st
      outside STEP    at STEP the candidate picks the reference's 8th token
      ids-only        only tokens.npy and ids.npy
      not-first STEP  at STEP the candidate's chosen id is its top-k row's 2nd, the row unchanged
      op-noise L/OP/S Gaussian noise of S times its std on layer L's op OP (ops/L/OP.npy)
  verify_cases.py gate REF OUT.json MODE [ARG]   OUT.json: REF's choices as mlir-air's verify_runner.py
      --gate-phase capture-npu --gate-file writes them ({"0": {"chosen": [32], "topk": [32 x 5]}, ...})
      same            unchanged
      inside STEP, outside STEP   as for make
      inside-fail STEP  at STEP the candidate picks the reference's 2nd, and its top-5 lacks the reference's 1st
      drop-prompt     the last prompt left out
      short           each prompt's last step left out
      narrow          rows of 4 ids
  verify_cases.py expect REF CAND           the rules' verdict and lens, as JSON on stdout (CAND a bundle
                                            or a gate file)
"""
import json
import os
import shutil
import sys

import numpy as np

GATE_N, GATE_K = 32, 5


def prompts(d):
    return [p["name"] for p in json.load(open(os.path.join(d, "manifest.json")))["prompts"]]


def make(ref, out, mode, arg):
    shutil.copytree(ref, out)
    rng = np.random.default_rng(1234)
    for name in prompts(out):
        d = os.path.join(out, name)
        if mode == "swap":
            a, b = map(int, arg.split(","))
            x = np.load(os.path.join(d, "layers.npy"))
            x[[a, b]] = x[[b, a]]
            np.save(os.path.join(d, "layers.npy"), x)
        elif mode == "noise":
            for f in ("layers.npy", "final_norm.npy"):
                x = np.load(os.path.join(d, f)).astype(np.float64)
                axes = tuple(range(1, x.ndim)) if f == "layers.npy" else None
                std = x.std(axis=axes, keepdims=True)
                x = x + rng.standard_normal(x.shape) * std * float(arg)
                np.save(os.path.join(d, f), x.astype(np.float32))
        elif mode in ("inside", "outside"):
            step = int(arg)
            ids, top = np.load(os.path.join(d, "ids.npy")), np.load(os.path.join(d, "topk_ids.npy"))
            pick = top[step, 1] if mode == "inside" else top[step, 7]
            ids[step] = pick
            row = top[step].copy()
            if mode == "inside":  # the candidate's own top-k: its pick first, the reference's second
                row[0], row[1] = top[step, 1], top[step, 0]
            else:  # its pick first, then the reference's others but its own choice, and an id of neither
                rest = [x for x in top[step] if x != pick and x != top[step, 0]]
                pad = next(i for i in range(len(rest) + 3) if i not in top[step])
                row = np.array([pick] + rest + [pad], dtype=top.dtype)[: top.shape[1]]
            top[step] = row
            np.save(os.path.join(d, "ids.npy"), ids)
            np.save(os.path.join(d, "topk_ids.npy"), top)
        elif mode in ("tie-in", "tie-out"):
            # at STEP the candidate picks the reference's 2nd token; in its own top-k the reference's
            # choice ties for 5th place with another id, listed before it in the file: the rule's
            # order (the smaller id first) puts the reference's choice in (tie-in) or out (tie-out)
            step = int(arg)
            ids, top = np.load(os.path.join(d, "ids.npy")), np.load(os.path.join(d, "topk_ids.npy"))
            pick, ref_choice = top[step, 1], top[step, 0]
            other = ref_choice + 1 if mode == "tie-in" else ref_choice - 1
            used = {int(pick), int(ref_choice), int(other)}
            fill = [i for i in range(1, 10 ** 6) if i not in used][: top.shape[1] - 3]
            row = [pick] + fill[:3] + [ref_choice, other] + fill[3:]
            lg = [10.0, 9.0, 8.0, 7.0, 5.0, 5.0] + [0.0] * (top.shape[1] - 6)
            ids[step] = pick
            top[step] = np.array(row[: top.shape[1]], dtype=top.dtype)
            logits = np.load(os.path.join(d, "topk_logits.npy"))
            logits[step] = np.array(lg, dtype=np.float32)
            np.save(os.path.join(d, "ids.npy"), ids)
            np.save(os.path.join(d, "topk_ids.npy"), top)
            np.save(os.path.join(d, "topk_logits.npy"), logits)
        elif mode == "topk-only":
            os.remove(os.path.join(d, "ids.npy"))
        elif mode == "topk-reversed":  # as np.argsort writes them: ascending; the rule's order is verify's to make
            os.remove(os.path.join(d, "ids.npy"))
            for f in ("topk_ids.npy", "topk_logits.npy"):
                np.save(os.path.join(d, f), np.load(os.path.join(d, f))[:, ::-1].copy())
        elif mode == "nan-logit":  # a NaN among the candidate's logits: an overflow, one line (exit 2)
            lg = np.load(os.path.join(d, "topk_logits.npy"))
            lg[:, 1] = np.nan
            np.save(os.path.join(d, "topk_logits.npy"), lg)
        elif mode == "renamed":  # the candidate's own name for its prompt folder
            man = json.load(open(os.path.join(out, "manifest.json")))
            man["prompts"][0]["name"] = "first"
            json.dump(man, open(os.path.join(out, "manifest.json"), "w"))
            os.rename(d, os.path.join(out, "first"))
            break
        elif mode == "not-first":
            step = int(arg)
            ids, top = np.load(os.path.join(d, "ids.npy")), np.load(os.path.join(d, "topk_ids.npy"))
            ids[step] = top[step, 1]
            np.save(os.path.join(d, "ids.npy"), ids)
        elif mode == "ids-only":
            for f in os.listdir(d):
                if f == "ops":
                    shutil.rmtree(os.path.join(d, f))
                elif f not in ("tokens.npy", "ids.npy"):
                    os.remove(os.path.join(d, f))
        elif mode == "op-noise":  # noise of ARG times its std on one op's output, LAYER/NAME
            layer, name, scale = arg.split("/")
            f = os.path.join(d, "ops", layer, name + ".npy")
            x = np.load(f).astype(np.float64)
            np.save(f, (x + rng.standard_normal(x.shape) * x.std() * float(scale)).astype(np.float32))
        else:
            sys.exit("unknown mode " + mode)


def gate(ref, out, mode, arg):
    data = {}
    for i, name in enumerate(prompts(ref)):
        d = os.path.join(ref, name)
        ids, top = np.load(os.path.join(d, "ids.npy"))[:GATE_N], np.load(os.path.join(d, "topk_ids.npy"))[:GATE_N]
        top = top[:, :GATE_K].copy()
        if mode in ("inside", "outside", "inside-fail"):
            step = int(arg)
            full = np.load(os.path.join(d, "topk_ids.npy"))
            pick = full[step, 7] if mode == "outside" else full[step, 1]
            ids[step] = pick
            if mode == "inside":  # its pick first, the reference's second
                top[step, 0], top[step, 1] = full[step, 1], full[step, 0]
            else:  # its pick first, then ids of neither side's choice: the reference's is not in its top-5
                rest = [x for x in full[step] if x != pick and x != full[step, 0]]
                top[step] = np.array([pick] + rest[: GATE_K - 1], dtype=top.dtype)
        elif mode == "short":
            ids, top = ids[:-1], top[:-1]
        elif mode == "narrow":
            top = top[:, :4]
        elif mode not in ("same", "drop-prompt"):
            sys.exit("unknown gate mode " + mode)
        data[str(i)] = {"chosen": [int(x) for x in ids], "topk": [[int(x) for x in row] for row in top]}
    if mode == "drop-prompt":
        del data[str(len(data) - 1)]
    json.dump(data, open(out, "w"))


def gate_rows(d):
    """Each step's top-5, in the rule's order (logit descending, the smaller id first) when logits are there."""
    path = os.path.join(d, "topk_ids.npy")
    if not os.path.exists(path):
        return None
    top = np.load(path)
    lpath = os.path.join(d, "topk_logits.npy")
    if os.path.exists(lpath):
        lg = np.nan_to_num(np.load(lpath).astype(np.float64), nan=-np.inf)
        top = np.array([[i for _, i in sorted(zip(-lg[s], top[s]))] for s in range(len(top))])
    return top[:, :GATE_K]


def cosines(r, c):
    r, c = r.astype(np.float64), c.astype(np.float64)
    num = (r * c).sum(axis=-1)
    den = np.sqrt((r * r).sum(axis=-1) * (c * c).sum(axis=-1))
    return np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)


def whole(r, c):
    r, c = r.astype(np.float64).ravel(), c.astype(np.float64).ravel()
    den = np.sqrt((r * r).sum() * (c * c).sum())
    return float((r * c).sum() / den) if den > 0 else 0.0


def expect(ref, cand):
    man = json.load(open(os.path.join(ref, "manifest.json")))
    hd = man["head_dim"]
    thr = 0.99 if hd <= 64 else 0.98 if hd <= 128 else 0.97
    out = {"prompts": []}
    fail = False
    gate_file = json.load(open(cand)) if os.path.isfile(cand) else None
    for i, name in enumerate(prompts(ref)):
        R, C = os.path.join(ref, name), os.path.join(cand, name)
        p = {"name": name}
        rids = np.load(os.path.join(R, "ids.npy"))
        rtop = gate_rows(R)
        if gate_file is not None:  # the i-th prompt of the prompts file: its chosen ids and top-k
            cids, ctop = np.array(gate_file[str(i)]["chosen"]), np.array(gate_file[str(i)]["topk"])[:, :GATE_K]
        else:
            ctop = gate_rows(C)
            cpath = os.path.join(C, "ids.npy")
            cids = np.load(cpath) if os.path.exists(cpath) else gate_rows(C)[:, 0]
        n = min(len(rids), len(cids), GATE_N)
        verdict, diverge, ranks = "OK", None, (None, None)
        for s in range(n):
            if rids[s] != cids[s]:
                diverge = s
                # 1-based rank of each side's choice in the other's top-5, None when not in it (their fields)
                ranks = (list(rtop[s]).index(cids[s]) + 1 if cids[s] in rtop[s] else None,
                         list(ctop[s]).index(rids[s]) + 1 if ctop is not None and rids[s] in ctop[s] else None)
                if cids[s] not in rtop[s]:
                    verdict = "FAIL"
                elif ctop is None:
                    verdict = "not checked"
                elif rids[s] not in ctop[s]:
                    verdict = "FAIL"
                break
        p["token_gate"], p["diverge"] = verdict, diverge
        p["test_chosen_rank_in_ref"], p["ref_chosen_rank_in_test"] = ranks
        fail |= verdict == "FAIL"
        lpath = os.path.join(C, "layers.npy")
        if gate_file is None and os.path.exists(lpath):
            rl, cl = np.load(os.path.join(R, "layers.npy")), np.load(lpath)
            rows = [(rl[i], cl[i]) for i in range(len(rl))]
            if os.path.exists(os.path.join(C, "final_norm.npy")):
                rows.append((np.load(os.path.join(R, "final_norm.npy")), np.load(os.path.join(C, "final_norm.npy"))))
            lens = []
            for r, c in rows:
                pc = cosines(r, c)
                lens.append({"cos": whole(r, c), "cos_min": float(pc.min()), "cos_p5": float(np.percentile(pc, 5)),
                             "cos_median": float(np.median(pc)), "cos_mean": float(pc.mean()),
                             "max_abs": float(np.abs(c.astype(np.float64) - r).max())})
            p["lens"] = lens
            low = [i for i, x in enumerate(lens) if x["cos_min"] < thr]
            p["first_below_threshold"] = low[0] if low else None
            b = lens[0]
            p["block_gate"] = "OK" if b["cos"] >= 0.99 and b["cos_min"] >= thr else "FAIL"
            fail |= p["block_gate"] == "FAIL"
        out["prompts"].append(p)
    out["pass"] = not fail
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
    elif sys.argv[1] == "gate":
        gate(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        expect(sys.argv[2], sys.argv[3])

"""Fuzzing the newer surfaces: simulate flags and traces, search grids, the card cache,
files with duplicate keys, and the JAX/ONNX importers on loops and unknown ops.

Each case must end in success or a one-line error within a time limit, and a success must not
be a wrong answer: every number it prints (``--json``) is finite and non-negative, and no
throughput exceeds what the device's peak can compute (a generated token costs at least
``2 x`` the model's active non-embedding parameters in FLOPs). No file may appear outside the
paths a case names. ``COSTMODEL_FUZZ_EXAMPLES=2000`` runs a large budget; every test prints its
tally (``pytest -n 0 -s tests/test_fuzz_surfaces.py``), and the last one prints them all.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.cli import main
from tests.test_fuzz import FUZZ, LIMIT_S, Hang, hostile, plausible, time_limit

TALLY: dict[str, dict[str, int]] = {}


def _count(surface: str, outcome: str) -> None:
    TALLY.setdefault(surface, {}).setdefault(outcome, 0)
    TALLY[surface][outcome] += 1


def _numbers(value, path=""):
    """Every number in a JSON document with its path."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        yield path, float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")


def _token_ceiling(model: str, device: str, devices: int = 1) -> float:
    """Tokens/s no deployment of ``devices`` devices can exceed: the fastest roof over the
    FLOPs of one token's matmuls (2 x active non-embedding parameters)."""
    from costmodel import get_device
    from models import get_model, param_counts

    hw = get_device(device)
    peak = max(float(r.peak_flops_per_s) for r in hw.roofs)
    pc = param_counts(get_model(model))
    active = max(float(pc.active - pc.embedding), float(pc.lm_head))  # generous: the smaller count
    return devices * peak / (2 * active)


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    with time_limit(LIMIT_S):
        code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _check_exit(argv, code, err, surface):
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert code in (0, 1, 2, 141), (argv, code, err[-500:])
    assert "Traceback" not in err and "internal error" not in err, (argv, err[-500:])
    assert code != 2 or len(errors) == 1, (argv, err[-500:])
    _count(surface, f"exit {code}")


def _check_answer(argv, doc, surface, ceiling=None):
    """No negative, NaN or infinite number; no throughput beyond ``ceiling`` tokens/s."""
    for where, v in _numbers(doc):
        ok = math.isfinite(v) and v >= 0
        if ceiling is not None and "tokens_per_s" in where:
            ok = ok and v <= ceiling
        if not ok:
            _count(surface, "wrong answer")
        assert ok, (argv, where, v)


# -- simulate flags ------------------------------------------------------------


@st.composite
def simulate_lines(draw, workdir: Path, marker: Path):
    argv = ["simulate", "tiny", "--json", "--quiet", "--requests", str(draw(st.integers(1, 60)))]
    value = st.one_of(plausible(), hostile(marker), st.sampled_from(["1e-320", "1e-300", "1e300", "5"]))
    flags = {
        "--rate": value,
        "--seed": st.one_of(st.integers(-3, 10**6).map(str), hostile(marker)),
        "--prompt": st.sampled_from(["fixed:500", "fixed:0", "uniform:10,5", "lognormal:100,0.5", "bogus"]),
        "--output": st.sampled_from(["fixed:50", "fixed:1", "uniform:1,8", "lognormal:20,9", "fixed:-1"]),
        "--arrival": st.sampled_from(["poisson", "gamma:2", "gamma:0", "gamma:nan", "constant"]),
        "--disagg": st.sampled_from(["1:1", "1:2", "100000000:1", "1:1000000", "0:1", "1:0", "a:b"]),
        "--link-bandwidth": value,
        "--link-latency": value,
        "--replicas": st.one_of(st.integers(-1, 5).map(str), hostile(marker)),
        "--max-num-seqs": st.one_of(st.integers(-1, 300).map(str), hostile(marker)),
        "--max-num-batched-tokens": st.one_of(st.integers(-1, 9000).map(str), hostile(marker)),
        "--block-size": st.one_of(st.sampled_from(["16", "0", "7", "1024"]), hostile(marker)),
        "--overhead-s": value,
        "--shared-prefix": st.one_of(st.integers(-1, 3000).map(str), hostile(marker)),
        "--slo-ttft": value,
        "--slo-tpot": value,
        "--percentile": st.sampled_from(["50", "99", "100", "0", "101", "nan"]),
        "--csv": st.sampled_from([str(workdir / "r.csv"), str(workdir / "no/r.csv"), "/dev/full"]),
    }
    for flag in draw(st.lists(st.sampled_from(sorted(flags)), max_size=4, unique=True)):
        argv += [flag, draw(flags[flag])]
    # the deployment, the engine and the workload's shape: drawn beside the flags above
    small = st.one_of(st.integers(-1, 9).map(str), hostile(marker))
    deployment = {
        "--device": st.sampled_from(["h100", "b200", "a100", "h200", "l4", "nope"]),
        "--tp": st.sampled_from(["1", "2", "3", "8", "0"]),
        "--dp": st.sampled_from(["1", "2", "0"]),
        "--weight-dtype": st.sampled_from(["bf16", "fp8", "nvfp4", "int4", "bool", "x"]),
        "--kv-dtype": st.sampled_from(["bf16", "fp8", "fp32", "int8", "x"]),
        "--engine": st.sampled_from(["vllm", "sglang", "trtllm", "vllm@0.6", "vllm@", "nope", "list"]),
        "--scheduler-policy": st.sampled_from(["recompute", "guaranteed_no_evict", "x"]),
        "--gpu-memory-utilization": st.one_of(st.sampled_from(["0.9", "0.01", "1", "1.5", "0"]), value),
        "--kv-watermark": st.one_of(st.sampled_from(["0", "0.01", "0.5", "1"]), value),
        "--num-blocks": st.one_of(st.integers(-1, 5000).map(str), hostile(marker)),
        "--concurrency": small,
        "--turns": small,
        "--think-time": value,
        "--prompt-pool": small,
        "--router": st.sampled_from(["round_robin", "least_outstanding", "prefix", "x"]),
        "--spec-draft": st.sampled_from(["tiny", "ngram", "mtp", "llama-3.1-8b", "nope"]),
        "--spec-k": small,
        "--spec-accept": st.sampled_from(["0.7", "0", "1", "0.5,0.4", "1.5", "nan", "a"]),
        "--host-kv-bytes": value,
        "--price-per-hour": value,
        "--rates": st.sampled_from(["1,2", "5", "0,1", "1,-1", "1e300", "a"]),
    }
    for flag in draw(st.lists(st.sampled_from(sorted(deployment)), max_size=2, unique=True)):
        argv += [flag, draw(deployment[flag])]
    if "--rate" not in argv and draw(st.booleans()):
        argv += ["--rate", "5"]
    for switch in ("--enable-prefix-caching", "--no-chunked-prefill", "--max-rate"):
        if draw(st.integers(0, 4)) == 0:
            argv.append(switch)
    return argv


def _deployment_ceiling(argv: list[str]) -> float:
    """:func:`_token_ceiling` of the case's device times its devices (tp x dp x replicas)."""
    from costmodel import get_device
    from costmodel.errors import CostModelError

    def given(flag: str, default: str) -> str:
        return argv[argv.index(flag) + 1] if flag in argv else default

    try:
        device = given("--device", "h100")
        get_device(device)
    except CostModelError:
        device = "b200"  # refused anyway; the fastest drawn
    devices = 1
    for flag in ("--tp", "--dp", "--replicas"):
        n = given(flag, "1")
        devices *= int(n) if n.isdigit() and 0 < int(n) < 100 else 1
    return _token_ceiling("tiny", device, devices)


def test_fuzz_simulate_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "payload-ran"

    @FUZZ
    @given(argv=simulate_lines(tmp_path, marker))
    def case(argv):
        before = set(tmp_path.rglob("*"))
        try:
            code, out, err = _run(argv, capsys)
        except Hang:
            _count("simulate flags", "hang")
            raise
        _check_exit(argv, code, err, "simulate flags")
        assert not marker.exists(), f"payload executed by {argv}"
        if code == 0 and out.strip():
            _check_answer(argv, json.loads(out), "simulate flags", _deployment_ceiling(argv))
        new = set(tmp_path.rglob("*")) - before
        assert new <= {tmp_path / "r.csv"}, (argv, new)

    case()
    print("\nfuzz tally:", json.dumps(TALLY["simulate flags"]))


# -- simulate traces -----------------------------------------------------------


@st.composite
def traces(draw):
    n = draw(st.integers(1, 30))
    offset = draw(st.sampled_from([0.0, 1.7e9, 1.7e12, 1e15]))
    gaps = draw(st.lists(st.floats(0, 2, allow_nan=False), min_size=n, max_size=n))
    rows = []
    t = offset
    prefixes = draw(st.booleans())
    for i, gap in enumerate(gaps):
        t += gap
        row = {
            "arrival_s": t,
            "prompt_tokens": draw(st.integers(1, 600)),
            "output_tokens": draw(st.integers(1, 40)),
        }
        if prefixes:
            row["prefix_id"] = f"p{i % 3}"
            row["prefix_tokens"] = min(row["prompt_tokens"], 256)
        rows.append(row)
    mutation = draw(st.sampled_from(["none", "none", "nan", "negative", "huge_field", "missing", "unsorted"]))
    if mutation == "nan":
        rows[0]["prompt_tokens"] = "nan"
    elif mutation == "negative":
        rows[-1]["output_tokens"] = -3
    elif mutation == "huge_field":
        rows[0]["prompt_tokens"] = "9" * 200_000
    elif mutation == "missing":
        del rows[0]["arrival_s"]
    elif mutation == "unsorted":
        rows.reverse()
    suffix = draw(st.sampled_from([".csv", ".CSV", ".jsonl", ".JSONL"]))
    bom = draw(st.booleans())
    return rows, suffix, bom, offset, prefixes


def _write_trace(path: Path, rows, bom: bool) -> None:
    if path.suffix.lower() == ".jsonl":
        text = "".join(json.dumps(r) + "\n" for r in rows)
    else:
        cols = list(dict.fromkeys(k for r in rows for k in r))
        lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in rows]
        text = "\n".join(lines) + "\n"
    path.write_text(("\ufeff" if bom else "") + text, encoding="utf-8")


def test_fuzz_simulate_traces(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ceiling = _token_ceiling("tiny", "h100")

    @FUZZ
    @given(trace=traces(), caching=st.booleans())
    def case(trace, caching):
        rows, suffix, bom, offset, prefixes = trace
        path = tmp_path / f"t{suffix}"
        _write_trace(path, rows, bom)
        argv = ["simulate", "tiny", "--trace", str(path), "--json", "--quiet"]
        if caching:
            argv.append("--enable-prefix-caching")
        code, out, err = _run(argv, capsys)
        _check_exit(argv, code, err, "simulate traces")
        if code == 0:
            doc = json.loads(out)
            _check_answer(argv, doc, "simulate traces", ceiling)
            # a request needs at least its prefill: TTFT is never zero, whatever the clock's origin
            wrong = not doc["ttft"]["mean_s"] > 0
            # a prefix seen before is a hit once its blocks are cached (the tiny model's cache is huge)
            repeats = prefixes and caching and len(rows) > 3
            wrong = wrong or (repeats and doc["prefix_cache_hits"] == 0)
            if wrong:
                _count("simulate traces", "wrong answer")
            assert not wrong, (argv, offset, doc["ttft"], doc["prefix_cache_hits"])

    case()
    print("\nfuzz tally:", json.dumps(TALLY["simulate traces"]))


# -- search grids --------------------------------------------------------------


@st.composite
def search_lines(draw, marker: Path):
    devices = draw(
        st.lists(st.sampled_from(["h100", "h100-sxm", "b200", "a100", "h100"]), min_size=1, max_size=4)
    )
    argv = ["search", "tiny", "--json", "--devices", ",".join(devices)]
    # the largest grids are strided: with --json every frontier point is printed (on the tiny model
    # every batch is on the frontier), and 4,096 batches x 128 contexts x 2 devices printed 1M
    # points (minutes of JSON, no hang); 64 x 16 x 4 devices stays within a case's time limit
    grids = {
        "--batches": st.sampled_from(["1..8", "1,2,2,4", "4..1", "0..4", "1..4096/64", "1..8/3"]),
        "--ctxs": st.sampled_from(["1024", "1024..8192/1024", "128,128", "0", "1024..131072/8192"]),
        "--tp": st.sampled_from(["1", "1,2", "1,1", "3"]),
    }
    for flag in draw(st.lists(st.sampled_from(sorted(grids)), max_size=3, unique=True)):
        argv += [flag, draw(st.one_of(grids[flag], hostile(marker)))]
    return argv


def test_fuzz_search_grids(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "payload-ran"

    @FUZZ
    @given(argv=search_lines(marker))
    def case(argv):
        code, out, err = _run(argv, capsys)
        _check_exit(argv, code, err, "search grids")
        assert not marker.exists()
        if code == 0:
            doc = json.loads(out)
            _check_answer(argv, doc, "search grids")
            rows = [json.dumps(r, sort_keys=True) for r in _frontier_rows(doc)]
            if len(rows) != len(set(rows)):
                _count("search grids", "wrong answer")
            assert len(rows) == len(set(rows)), (argv, "a frontier point is listed twice")

    case()
    print("\nfuzz tally:", json.dumps(TALLY["search grids"]))


def _frontier_rows(doc):
    """The frontier points of a search document, one list or one per context."""
    if "frontier" in doc:
        return doc["frontier"]
    return [p for f in doc.get("frontiers", []) for p in f.get("frontier", f.get("points", []))]


# -- the card cache ------------------------------------------------------------


def _tamper(path: Path, how: str, draw_number: float) -> None:
    text = path.read_text()
    if how == "edit_number":
        import re

        nums = list(re.finditer(r"(?<![\w.])\d+(\.\d+)?(e[+-]?\d+)?", text))
        if nums:
            m = nums[len(nums) // 2]
            text = text[: m.start()] + repr(draw_number) + text[m.end() :]
        path.write_text(text)
    elif how == "truncate":
        path.write_text(text[: len(text) // 2])
    elif how == "drop_line":
        lines = text.splitlines()
        path.write_text("\n".join(lines[1:]))
    elif how == "garbage":
        path.write_bytes(os.urandom(64))
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif how == "symlink_zero":
        path.unlink()
        path.symlink_to("/dev/zero")
    elif how == "directory":
        path.unlink()
        path.mkdir()
    elif how == "huge":
        with path.open("a") as f:
            f.write(" " * (20 * 2**20))


def test_fuzz_card_cache(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(cache))

    def answer(argv, cached: bool) -> str:
        monkeypatch.setenv("COSTMODEL_NO_CACHE", "0" if cached else "1")
        code, out, err = _run(argv, capsys)
        _check_exit(argv, code, err, "card cache")
        assert code == 0, (argv, err)
        return out

    @FUZZ
    @given(
        batch=st.integers(1, 64),
        ctx=st.integers(1, 4096),
        how=st.sampled_from(
            [
                "edit_number",
                "edit_number",
                "truncate",
                "drop_line",
                "garbage",
                "fifo",
                "symlink_zero",
                "directory",
                "huge",
            ]
        ),
        number=st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([-5.0, 0.0, 2.0, 1e300])),
    )
    def case(batch, ctx, how, number):
        argv = ["decode", "llama-3.1-8b", "--batch", str(batch), "--ctx", str(ctx), "--json"]
        truth = answer(argv, cached=False)
        assert answer(argv, cached=True) == truth  # stores, or serves what it stored
        cards = [p for p in cache.rglob("*") if p.is_file() and not p.is_symlink()]
        for card in cards:
            _tamper(card, how, number)
        served = answer(argv, cached=True)
        if served != truth:
            _count("card cache", "wrong answer")
        assert served == truth, (argv, how, number)
        for p in list(cache.rglob("*")):  # the next case starts from an empty cache
            if p.is_dir() and not p.is_symlink():
                continue
            p.unlink()
        for p in sorted(cache.rglob("*"), reverse=True):
            if p.is_dir() and p != cache:
                p.rmdir()
        _count("card cache", how)

    case()
    print("\nfuzz tally:", json.dumps(TALLY["card cache"]))


# -- files with duplicate keys ---------------------------------------------------


def test_fuzz_duplicate_keys(tmp_path):
    from costmodel import load_hardware_file
    from models.resolver import load_hf_config

    roof = '{"unit": "tensor", "precision": "bf16", "peak_flops_per_s": 4e14}'
    twice = '{"unit": "tensor", "precision": "bf16", "peak_flops_per_s": 4e14, "peak_flops_per_s": 4e16}'
    mem = '{"name": "dram", "bandwidth_bytes_per_s": 2e12, "capacity_bytes": 6.4e10}'
    device = '{"roofs": [' + roof + '], "memory": [' + mem + "]}"
    hw_docs = [
        '{"devices": {"fz": ' + device + ', "fz": ' + device + "}}",  # a device given twice
        '{"devices": {"fz": ' + device + '}, "devices": {}}',  # the table given twice
        '{"devices": {"fz": {"roofs": [' + twice + '], "memory": [' + mem + "]}}}",  # a field twice
    ]
    base = (
        '"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, '
        '"vocab_size": 256, "intermediate_size": 176'
    )
    cfg_docs = ["{" + base + ', "hidden_size": 128}', "{" + base + ', "num_hidden_layers": 2}']

    @FUZZ
    @given(which=st.integers(0, len(hw_docs) + len(cfg_docs) - 1))
    def case(which):
        path = tmp_path / "f.json"
        if which < len(hw_docs):
            path.write_text(hw_docs[which])
            load = load_hardware_file
        else:
            path.write_text(cfg_docs[which - len(hw_docs)])
            load = load_hf_config
        with time_limit(LIMIT_S), pytest.raises(CostModelError, match=r"twice|duplicate"):
            load(path)
        _count("duplicate keys", "refused")

    case()
    print("\nfuzz tally:", json.dumps(TALLY["duplicate keys"]))


# -- importers on loops and unknown ops -----------------------------------------


def test_fuzz_jax_loops():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from costmodel.graph import graph_total
    from graphs.importers.jax_import import from_jax

    x = jnp.ones((8, 16), dtype=jnp.float32)
    w = jnp.ones((16, 16), dtype=jnp.float32)
    one = 2 * 8 * 16 * 16  # one [8,16] x [16,16] matmul: 2*M*N*K FLOPs

    @FUZZ
    @given(trips=st.integers(1, 40), kind=st.sampled_from(["scan", "fori", "nested"]))
    def case(trips, kind):
        if kind == "scan":

            def f(x):
                return jax.lax.scan(lambda c, _: (c @ w, None), x, None, length=trips)[0]

            expected = trips * one
        elif kind == "fori":

            def f(x):
                return jax.lax.fori_loop(0, trips, lambda i, c: c @ w, x)

            expected = trips * one
        else:

            def f(x):
                inner = lambda c, _: (c @ w, None)  # noqa: E731
                return jax.lax.scan(
                    lambda c, _: (jax.lax.scan(inner, c, None, length=3)[0], None), x, None, length=trips
                )[0]

            expected = 3 * trips * one
        with time_limit(LIMIT_S):
            g = from_jax(f, x)
        tensor = float(graph_total(g).flops_on("tensor"))
        ok = tensor == expected
        if not ok:
            _count("jax loops", "wrong answer")
        assert ok, (kind, trips, tensor, expected)
        _count("jax loops", kind)

    case()
    print("\nfuzz tally:", json.dumps(TALLY["jax loops"]))


def test_fuzz_onnx_unknown_ops_and_cycles(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from graphs.importers.onnx import from_onnx

    @FUZZ
    @given(
        op=st.sampled_from(["Relu", "NoSuchOp", "Frobnicate", "MatMul", "Gelu"]),
        cyclic=st.booleans(),
        domain=st.sampled_from(["", "", "com.example"]),
    )
    def case(op, cyclic, domain):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
        ins = ["x", "x"] if op == "MatMul" else ["x"]
        nodes = [helper.make_node(op, ins if not cyclic else ["z"], ["y"], domain=domain)]
        if cyclic:
            nodes.append(helper.make_node("Relu", ["y"], ["z"]))
        model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
        path = tmp_path / "m.onnx"
        path.write_bytes(model.SerializeToString())
        with time_limit(LIMIT_S):
            try:
                g = from_onnx(str(path))
                unknown = g.graph.get("unknown_ops", {})
                known = op in ("Relu", "MatMul", "Gelu") and domain == ""
                assert known or unknown, (op, domain, "an unknown op was neither counted nor refused")
                _count("onnx", "imported")
            except CostModelError:
                _count("onnx", "refused")

    case()
    print("\nfuzz tally:", json.dumps(TALLY["onnx"]))


def test_zz_print_the_whole_tally():
    """The tally of every surface above (run with -s to see it)."""
    print("\nfuzz tally, all surfaces:", json.dumps(TALLY, indent=1, sort_keys=True))
    for surface, counts in TALLY.items():
        assert counts.get("wrong answer", 0) == 0 and counts.get("hang", 0) == 0, surface

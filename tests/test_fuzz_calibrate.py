"""Fuzzing ``calibrate serving``'s inputs (vLLM, GuideLLM and CSV result files: types, sizes,
extremes), the fit files ``--predict-file`` reads, and the output paths commands write.

Each case must end in success or a one-line error within a time limit (the checks of
:mod:`tests.test_fuzz_surfaces`), and a success must not break physics: a written fit reads back
by the same code, never with a kernel scale below 1 on the bound (its kernels faster than their
roofline), and a step priced with a fit is never below its roofline bound. No file may appear
outside the paths a case names, and no link is written through. ``COSTMODEL_FUZZ_EXAMPLES``
sets the budget (default small).
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from graphs.serving.planning.serving_fit import read_fit
from tests.test_fuzz import FUZZ
from tests.test_fuzz_surfaces import TALLY, _check_answer, _check_exit, _run

#: numbers a result file may hold where a latency, a count or a rate goes
EXTREMES = st.one_of(
    st.sampled_from([0, -1, 1e-300, 5e-324, 1e300, 1e9, 2**63, 0.5, 3, True, None, "1", [], {}]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e3, max_value=1e3),
)


def _base_rows(draw) -> list[dict]:
    n = draw(st.integers(1, 25))
    rows = []
    t = 0.0
    for _ in range(n):
        t += draw(st.floats(0, 1))
        o = draw(st.integers(1, 12))
        ttft = draw(st.floats(1e-4, 0.5))
        tpot = draw(st.floats(1e-4, 0.05))
        rows.append(
            {"arrival": t, "prompt": draw(st.integers(1, 400)), "output": o, "ttft": ttft, "tpot": tpot}
        )
    return rows


def _mutate(draw, value, odds: int):
    """One time in ``odds`` (never for 0), replace one thing by an extreme of another type or size."""
    return draw(EXTREMES) if odds and draw(st.integers(1, odds)) == 1 else value


@st.composite
def result_files(draw) -> tuple[str, str]:
    """(suffix, text) of one result file in one of the three formats, possibly hostile."""
    rows = _base_rows(draw)
    kind = draw(st.sampled_from(["vllm", "guidellm", "csv"]))
    odds = draw(st.sampled_from([0, 0, 20, 200]))  # a clean file half the time
    if kind == "csv":
        head = "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"
        lines = [head]
        for r in rows:
            vals = [
                r["arrival"],
                r["prompt"],
                r["output"],
                r["ttft"],
                r["ttft"] + r["tpot"] * (r["output"] - 1),
            ]
            lines.append(",".join(str(_mutate(draw, v, odds)) for v in vals))
        return ".csv", "\n".join(lines) + "\n"
    if kind == "vllm":
        doc: dict = {
            "request_rate": _mutate(draw, draw(st.sampled_from([1.0, 4.0, "inf"])), odds),
            "burstiness": _mutate(draw, 1.0, odds),
            "max_concurrency": _mutate(draw, None, odds),
            "input_lens": [_mutate(draw, r["prompt"], odds) for r in rows],
            "output_lens": [_mutate(draw, r["output"], odds) for r in rows],
            "ttfts": [_mutate(draw, r["ttft"], odds) for r in rows],
            "itls": [_mutate(draw, [r["tpot"]] * (r["output"] - 1), odds) for r in rows],
            "errors": [""] * len(rows),
        }
        key = draw(st.sampled_from([None, None, "input_lens", "ttfts", "itls", "errors"])) if odds else None
        if key is not None:
            doc[key] = _mutate(draw, draw(st.sampled_from(["abc", [{}] * 3, {}, 7])), odds)
        return ".json", json.dumps(doc)
    reqs = [
        {
            "prompt_tokens": _mutate(draw, r["prompt"], odds),
            "output_tokens": _mutate(draw, r["output"], odds),
            "start_time": _mutate(draw, 1.7e9 + r["arrival"], odds),
            "first_token_time": 1.7e9 + r["arrival"] + r["ttft"],
            "end_time": 1.7e9 + r["arrival"] + r["ttft"] + r["tpot"] * (r["output"] - 1),
        }
        for r in rows
    ]
    bench: dict = {
        "args": {
            "strategy": {
                "rate": _mutate(
                    draw, draw(st.sampled_from([None, 2.0] + ([1e300, -1] if odds else []))), odds
                )
            }
        },
        "requests": _mutate(draw, {"successful": reqs, "errored": []}, odds),
    }
    return ".json", json.dumps({"benchmarks": [_mutate(draw, bench, odds)]})


def test_fuzz_calibrate_serving_inputs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    @FUZZ
    @given(
        files=st.lists(result_files(), min_size=1, max_size=3),
        terms=st.sampled_from([None, "kernel_scale,request_s"]),
    )
    def case(files, terms):
        for p in tmp_path.iterdir():
            p.unlink()
        paths = []
        for i, (suffix, text) in enumerate(files):
            p = tmp_path / f"run{i}{suffix}"
            p.write_text(text)
            paths.append(str(p))
        out = tmp_path / "fit.json"
        argv = ["calibrate", "serving", *paths, "--model", "tiny", "--device", "h100", "-o", str(out)]
        argv += ["--quiet", "--json", "--max-requests", "20"] + (["--terms", terms] if terms else [])
        code, stdout, err = _run(argv, capsys)
        _check_exit(argv, code, err, "calibrate serving inputs")
        assert "Warning" not in err, (argv, err[-500:])
        assert set(tmp_path.iterdir()) <= {*map(Path, paths), out}, argv
        if code == 0:
            doc = json.loads(stdout)
            _check_answer(argv, doc["overheads"], "calibrate serving inputs")
            fit = read_fit(str(out))  # the same code reads back what it wrote
            physical = fit.overheads.kernel_scale >= 1.0  # on the bound: never below the roofline
            if not physical:
                TALLY["calibrate serving inputs"]["wrong answer"] = 1
            assert physical, (argv, fit.overheads)

    case()
    print("\nfuzz tally:", json.dumps(TALLY.get("calibrate serving inputs")))


@st.composite
def fit_files(draw) -> dict:
    ov = {
        "iteration_s": 0.0,
        "per_seq_s": 0.0,
        "per_token_s": 0.0,
        "request_s": 0.0,
        "output_token_s": 0.0,
        "kernel_scale": draw(st.one_of(st.floats(0.05, 20), st.sampled_from([0.05, 0.04999999999999999, 1]))),
        "cudagraph_sizes": [],
        "policy": None,
        "basis": draw(st.sampled_from(["x", "esc\u001b[2J", "a" * 5000])),
    }
    doc: dict = {
        "format": "costmodel-serving-fit",
        "version": draw(st.sampled_from([2, 3, 3, 4, "3"])),
        "model": "tiny",
        "device": "h100-sxm",
        "tp": 1,
        "predict": None,
        "fp8_scales": "dynamic",
        "overheads": ov,
        "stderr": {},
        "runs": [],
        "sources": [],
        "rms_residual": 0,
    }
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.sampled_from(["top", "overheads"]))
        target = doc if where == "top" else ov
        key = draw(st.sampled_from([*sorted(target), "extra"]))
        if draw(st.booleans()):
            target[key] = draw(EXTREMES)
        else:
            target.pop(key, None)
    return doc


def test_fuzz_predict_files(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    @FUZZ
    @given(doc=fit_files(), phase=st.sampled_from(["decode", "prefill"]))
    def case(doc, phase):
        f = tmp_path / "fit.json"
        f.write_text(json.dumps(doc))
        point = ["--ctx", "500"] if phase == "decode" else ["--seq", "300"]
        argv = [phase, "tiny", "--device", "h100", "--batch", "4", *point, "--predict-file", str(f), "--json"]
        code, stdout, err = _run(argv, capsys)
        _check_exit(argv, code, err, "predict files")
        assert "\x1b" not in stdout + err
        if code == 0:
            d = json.loads(stdout)["engine_overheads"]
            ok = d["step_s"] >= d["bound_s"] and math.isfinite(d["step_s"])  # physics is a floor
            if not ok:
                TALLY["predict files"]["wrong answer"] = 1
            assert ok, (argv, d)

    case()
    print("\nfuzz tally:", json.dumps(TALLY.get("predict files")))


def test_fuzz_output_paths(tmp_path, monkeypatch, capsys):
    """simulate's --csv and --plot and calibrate serving's -o on hostile paths: a link to a
    victim, one path twice (spelt two ways), a device, a folder, a missing folder, no name, a
    suffix no format has. The victim is never written; a refusal comes before any file."""
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    (tmp_path / "sub").mkdir()
    csv = tmp_path / "t.csv"
    rows = [(0.3 * i, 50 + 7 * i, 8, 0.004, 0.004 + 0.0005 * 7) for i in range(20)]
    csv.write_text(
        "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
        + "".join(",".join(map(repr, r)) + "\n" for r in rows)
    )
    paths = st.sampled_from(
        [
            "out.csv",
            "out.png",
            "sub/../out.png",
            "link.png",
            "link.json",
            "/dev/null",
            "/dev/full",
            "",
            "sub",
            "nofolder/x.png",
            "x.xyz",
            "out.json",
        ]
    )

    @FUZZ
    @given(cmd=st.sampled_from(["simulate", "calibrate"]), a=paths, b=paths)
    def case(cmd, a, b):
        for p in tmp_path.iterdir():  # each case starts from the inputs and fresh links only
            if p.name not in ("victim.txt", "sub", "t.csv"):
                p.unlink()
        victim.write_text("victim\n")
        for name in ("link.png", "link.json"):
            if not os.path.lexists(tmp_path / name):
                os.symlink("victim.txt", tmp_path / name)
        before = set(tmp_path.iterdir())
        if cmd == "simulate":
            argv = ["simulate", "tiny", "--rate", "3", "--requests", "6", "--quiet", "--csv", a, "--plot", b]
        else:
            argv = [
                "calibrate",
                "serving",
                str(csv),
                "--model",
                "tiny",
                "--device",
                "h100",
                "--quiet",
                "-o",
                a,
            ]
        code, _, err = _run(argv, capsys)
        _check_exit(argv, code, err, "output paths")
        assert victim.read_text() == "victim\n", argv  # never written through a link
        new = {p.name for p in set(tmp_path.iterdir()) - before}
        assert new <= {
            "out.csv",
            "out.png",
            "out-timeline.png",
            "link-timeline.png",
            "x.xyz",
            "x-timeline.xyz",
            "out.json",
            "sub-timeline.png",
        }, (argv, new)
        if code == 2 and "/dev/full" not in argv:  # a full device fails when written, after the work
            assert not new, (argv, new)  # refused before the work
        if "matplotlib.pyplot" in sys.modules:  # the plots' figures stay open in pyplot
            sys.modules["matplotlib.pyplot"].close("all")

    case()
    print("\nfuzz tally:", json.dumps(TALLY.get("output paths")))


def test_fuzz_workload_from_and_compare(tmp_path, monkeypatch, capsys):
    """``simulate --workload-from RESULT --compare`` on the same hostile result files: an answer or
    one line; an answer's every number finite and non-negative, nothing written but what is named."""
    monkeypatch.chdir(tmp_path)

    @FUZZ
    @given(file=result_files(), compare=st.booleans(), run=st.sampled_from([None, "0", "1", "-1", "x"]))
    def case(file, compare, run):
        for p in tmp_path.iterdir():
            p.unlink()
        suffix, text = file
        path = tmp_path / f"run{suffix}"
        path.write_text(text)
        argv = ["simulate", "tiny", "--device", "h100", "--workload-from", str(path), "--quiet", "--json"]
        argv += (["--compare"] if compare else []) + (["--workload-run", run] if run is not None else [])
        code, stdout, err = _run(argv, capsys)
        _check_exit(argv, code, err, "simulate --workload-from")
        assert set(tmp_path.iterdir()) <= {path}, argv
        if code == 0:
            doc = json.loads(stdout)
            signed = (doc.get("comparison") or {}).pop("errors", {})  # value / measured - 1: signed
            assert all(math.isfinite(e) and e >= -1 for es in signed.values() for e in es.values()), signed
            _check_answer(argv, doc, "simulate --workload-from")

    case()
    print("\nfuzz tally:", json.dumps(TALLY.get("simulate --workload-from")))


def test_fuzz_model_check(tmp_path, monkeypatch, capsys):
    """``model check`` and ``--assume-family`` on hostile config.json files (the config fuzzer's
    values under an unknown or known ``model_type``): an answer or one line, never a traceback."""
    from tests.test_fuzz import hf_configs

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "payload-ran"

    @FUZZ
    @given(
        cfg=hf_configs(marker),
        model_type=st.sampled_from([None, "acme_llm", "", 7]),
        family=st.sampled_from([None, "llama", "qwen3", "nope", "mamba"]),
    )
    def case(cfg, model_type, family):
        if model_type is not None:
            cfg = {**cfg, "model_type": model_type}
        path = tmp_path / "config.json"
        path.write_text(json.dumps(cfg))
        argv = ["model", "check", str(path), "--json"] + (["--assume-family", family] if family else [])
        code, stdout, err = _run(argv, capsys)
        _check_exit(argv, code, err, "model check")
        assert not marker.exists(), argv
        if code == 0:
            json.loads(stdout)

    case()
    print("\nfuzz tally:", json.dumps(TALLY.get("model check")))

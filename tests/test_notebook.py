"""examples/tour.ipynb runs top to bottom in a fresh kernel (nbclient), so it cannot rot."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_tour_notebook_executes():
    nbformat = pytest.importorskip("nbformat", reason="the html extra (nbformat) is not installed")
    nbclient = pytest.importorskip("nbclient", reason="the html extra (nbclient) is not installed")
    pytest.importorskip("ipykernel", reason="the html extra (ipykernel) is not installed")
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    nb = nbformat.read(ROOT / "examples" / "tour.ipynb", as_version=4)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), old) if p
    )  # the kernel imports this tree
    try:
        nbclient.NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
        ).execute()
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    plain = [o.get("data", {}).get("text/plain", "") for o in outputs]
    html = [o.get("data", {}).get("text/html", "") for o in outputs]
    assert plain[0] == "(2*K*M*N, 2*K*M + 2*K*N + 2*M*N)"  # one MAC per (m, n, k); each operand once
    assert plain[1].startswith("('dram',")  # M = 1: ~1 FLOP/B, far below the ridge point
    assert any(h.startswith("<b>DecodeReport</b><table") and "<th>step_s</th>" in h for h in html)
    assert any(h.startswith("<b>SimResult</b><table") for h in html)
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs)  # the roofline
    assert any("meet the SLOs" in o.get("text", "") for o in outputs)


def test_tour_simulation_is_the_simulate_command(capsys):
    """The tour's last cell (100 requests at 5/s, lognormal 500 and 100 tokens, seed 0, SLOs 0.5 s
    and 50 ms) prints the P99 TTFT and TPOT that ``costmodel simulate`` prints for the same
    workload, and the share meeting the SLOs it states."""
    import json
    import re

    from graphs.cli import main

    nb = json.loads((ROOT / "examples" / "tour.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert 'synthetic(100, rate=5, prompt="lognormal:500,0.5", output="lognormal:100,0.5", seed=0)' in code
    assert 'simulate("llama-3.1-8b", "h100-sxm", reqs, slo_ttft=0.5, slo_tpot=0.05)' in code
    from graphs.serving import simulate, synthetic

    reqs = synthetic(100, rate=5, prompt="lognormal:500,0.5", output="lognormal:100,0.5", seed=0)
    sim = simulate("llama-3.1-8b", "h100-sxm", reqs, slo_ttft=0.5, slo_tpot=0.05)
    argv = ["simulate", "llama-3.1-8b", "--device", "h100-sxm", "--requests", "100", "--rate", "5"]
    argv += ["--prompt", "lognormal:500,0.5", "--output", "lognormal:100,0.5", "--seed", "0"]
    assert main([*argv, "--slo-ttft", "0.5", "--slo-tpot", "0.05", "--quiet"]) == 0
    out = capsys.readouterr().out
    p99 = {m[1]: m[2] for m in re.finditer(r"^  (TTFT|TPOT) s +\S+ +\S+ +\S+ +(\S+)$", out, re.M)}
    assert p99 == {"TTFT": f"{sim.ttft.p99:.4f}", "TPOT": f"{sim.tpot.p99:.4f}"}
    assert f"({100 * sim.slo_attainment:.1f}% meet the SLOs)" in out

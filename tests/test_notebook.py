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

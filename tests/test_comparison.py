"""--compare: the bound, the prediction and a measured run side by side (issue 46 item 2)."""

import json
from types import SimpleNamespace as NS

import numpy as np
import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.serving.present.comparison import Column, compare, measured_column


def _run():
    # three requests sent at 0, 1, 2 s; TTFT 0.1/0.2/0.3 s; E2E 1.1/2.2/0.3 s; outputs 11, 21, 1
    return NS(
        summary=None,
        drawn=False,  # the file's own send times
        duration_s=None,
        arrival_s=np.array([0.0, 1.0, 2.0]),
        ttft_s=np.array([0.1, 0.2, 0.3]),
        e2e_s=np.array([1.1, 2.2, 0.3]),
        output=np.array([11, 21, 1]),
    )


def test_measured_metrics_as_a_client_counts_them():
    c = measured_column("measured", _run())
    # TPOT per request (E2E - TTFT) / (o - 1) over o >= 2: 1.0/10 = 0.1, 2.0/20 = 0.1
    assert c.values["TPOT mean"] == pytest.approx(0.1)
    assert c.values["TTFT mean"] == pytest.approx(0.2) and c.values["E2E mean"] == pytest.approx(1.2)
    # span: first send 0 to last completion max(0+1.1, 1+2.2, 2+0.3) = 3.2 s
    assert c.values["requests/s"] == pytest.approx(3 / 3.2)
    assert c.values["output tokens/s"] == pytest.approx(33 / 3.2)
    assert c.values["TTFT P90"] == pytest.approx(np.percentile([0.1, 0.2, 0.3], 90))


def test_errors_are_against_the_measured_column():
    m = measured_column("measured", _run())
    p = Column("predicted", {"TTFT mean": 0.25, "TPOT mean": 0.09}, {"TTFT mean": (0.2, 0.3)})
    comp = compare("m", "d", [p, m], measured="measured")
    assert comp.errors()["predicted"] == pytest.approx({"TTFT mean": 0.25, "TPOT mean": -0.1})
    text = "\n".join(comp.lines())
    assert "0.25 [0.2, 0.3]" in text and "TTFT mean +25.0 %" in text
    with pytest.raises(CostModelError, match="distinct"):
        compare("m", "d", [p, p])


def test_simulate_compares_the_bound_with_a_measured_run(tmp_path, capsys):
    path = tmp_path / "run.csv"
    rows = ["arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"]
    rows += [f"{i * 0.5},{64 + i},{16},{0.02 + 0.001 * i},{0.5 + 0.01 * i}" for i in range(20)]
    path.write_text("\n".join(rows) + "\n")
    argv = ["simulate", "tiny", "--workload-from", str(path), "--compare", "--quiet", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)["comparison"]
    assert [c["name"] for c in doc["columns"]] == ["bound", "measured (run.csv)"]
    # the measured TTFT mean: 0.02 + 0.001 * mean(0..19) = 0.0295 s
    assert doc["columns"][1]["values"]["TTFT mean s"] == pytest.approx(0.0295)
    assert set(doc["errors"]) == {"bound"}


def test_compare_needs_something_beside_the_bound(capsys):
    assert main(["simulate", "tiny", "--rate", "5", "--requests", "10", "--compare", "--quiet"]) == 2
    assert "--compare sets the bound beside" in capsys.readouterr().err


def test_a_metric_a_run_has_no_value_of_prints_n_a_with_why():
    """Runs whose every request generated one token have no TPOT (a NaN in the summary): the
    table printed ``nan`` in its cells; now ``n/a``, once, with the reason, and no error."""
    m = Column("measured", {"TTFT mean": 0.2, "TPOT mean": float("nan")}, {})
    p = Column("predicted", {"TTFT mean": 0.25, "TPOT mean": float("nan")}, {})
    comp = compare("m", "d", [p, m], measured="measured")
    assert comp.errors()["predicted"] == pytest.approx({"TTFT mean": 0.25})  # 0.25 / 0.2 - 1
    text = "\n".join(comp.lines())
    assert "nan" not in text
    assert text.count("TPOT mean n/a: no request generated two or more tokens") == 1


def test_a_fit_runs_undefined_error_prints_n_a():
    from graphs.serving.present.serving_fit_report import _pct

    assert _pct(-0.125) == " -12.5%" and _pct(float("nan")).strip() == "n/a"

"""A predicted run whose engine profile describes an earlier release than the corpus measured says
so once, in the text and in ``--json`` (issue 42: GPUStack's held-out vLLM 0.10-0.11 runs were
priced by vLLM 0.24.0's H100 kernels)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from graphs.serving.engines import get_engine

NOTE = "its kernels are priced from vllm 0.24.0 measurements; vllm@0.11 describes vllm 0.11"


def test_the_corpus_releases_are_the_wheels() -> None:
    """aiconfigurator-core 0.12.0's ``systems/query_versions.yaml``: vLLM ``current`` 0.24.0 by
    default, 0.14.0 for ``a100_sxm``; no device it does not measure."""
    pytest.importorskip("aiconfigurator_core")
    from costmodel.measured.corpus import framework_release

    assert framework_release("h100-sxm", "vllm") == "0.24.0"
    assert framework_release("a100-sxm-80gb", "vllm") == "0.14.0"
    assert framework_release("a100-sxm-40gb", "vllm") is None


@pytest.mark.parametrize(
    ("ref", "kernels", "noted"),
    [("vllm@0.11", "0.24.0", True), ("vllm@0.11", "0.11.2", False), ("vllm@0.20", "0.19.0", False),
     ("vllm@0.12", "0.14.0", True), ("vllm@1", "0.24.0", False), ("vllm@0.10", None, False),
     # compared at the profile's own precision: 0.5.14 is later than 0.5.1, within the 0.5 line
     ("sglang@0.5.1", "0.5.14", True), ("sglang@0.5", "0.5.10", False)],
)  # fmt: skip
def test_only_an_earlier_profile_than_the_kernels_is_noted(
    ref: str, kernels: str | None, noted: bool
) -> None:
    assert (get_engine(ref).kernel_release_note(kernels) is not None) is noted


def test_a_device_the_corpus_lacks_compares_the_releases_pricing_it() -> None:
    """An H100 PCIe (no corpus rows) is priced from the measured devices' fits: vLLM 0.14.0 (A100)
    to 0.24.0 (the rest), so a profile before 0.14 is noted, naming that span; one after it is not."""
    pytest.importorskip("aiconfigurator_core")
    from graphs.serving.present.simulation_report import kernel_release_note

    note = kernel_release_note(get_engine("vllm@0.11"), "vllm", "h100-pcie")
    assert note is not None and note.startswith(
        "its kernels are priced from vllm 0.14.0 to 0.24.0 (other devices')"
    )
    assert kernel_release_note(get_engine("vllm@0.20"), "vllm", "h100-pcie") is None
    assert kernel_release_note(get_engine("vllm@0.11"), "vllm", "h100").startswith(
        NOTE
    )  # an alias: h100-sxm's own


def _costmodel(*argv: str) -> str:
    """The standard output of ``costmodel argv``, run in this process (it must succeed)."""
    from graphs.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


def _simulate(*extra: str) -> str:
    argv = ["simulate", "gpt-oss-20b", "--device", "h100", "--predict", "vllm", "--requests", "20"]
    return _costmodel(*argv, "--rate", "2", "--no-interval", *extra)


def test_simulate_says_it_once_in_text_and_json() -> None:
    pytest.importorskip("aiconfigurator_core")
    assert _simulate("--engine", "vllm@0.11").count(NOTE) == 1
    doc = json.loads(_simulate("--engine", "vllm@0.11", "--json"))
    assert doc["engine"]["kernel_release_note"].startswith(NOTE)
    assert NOTE not in _simulate()  # vllm@1: the current line, no release to compare


def test_the_max_rate_search_says_it_once_in_text_and_json() -> None:
    """``--max-rate`` runs every probe on the same engine: its report says the note once (it said
    none), in the text and in ``--json``'s engine."""
    pytest.importorskip("aiconfigurator_core")
    args = "simulate gpt-oss-20b --device h100 --predict vllm --requests 20 --max-rate".split()
    args += ["--slo-tpot", "0.05", "--engine", "vllm@0.11"]
    assert _costmodel(*args).count(NOTE) == 1
    doc = json.loads(_costmodel(*args, "--json"))
    assert doc["engine"]["kernel_release_note"].startswith(NOTE)


def test_calibrate_serving_says_it_too() -> None:
    """A fit of a vLLM 0.11 run priced by vLLM 0.24.0's kernels absorbs what the releases' kernels
    differ by into its terms: ``calibrate serving`` says so (text and ``--json``'s engine)."""
    pytest.importorskip("aiconfigurator_core")
    from types import SimpleNamespace

    from graphs.serving.present.serving_fit_report import ServingFitReport

    def report(ref: str, predict: str | None) -> SimpleNamespace:
        req = SimpleNamespace(engine=get_engine(ref), predict=predict)
        return SimpleNamespace(request=req, fit=SimpleNamespace(device="h100-sxm"))

    assert ServingFitReport.kernel_release_note(report("vllm@0.11", "vllm")).startswith(NOTE)  # type: ignore[arg-type]
    assert ServingFitReport.kernel_release_note(report("vllm@0.11", None)) is None  # type: ignore[arg-type]
    assert ServingFitReport.kernel_release_note(report("vllm", "vllm")) is None  # type: ignore[arg-type]

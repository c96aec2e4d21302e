"""``simulate --max-rate`` and ``calibrate serving`` on an executor: the probes and the fit's
simulations run elsewhere, the answer is the one-process answer (issue 44 item 5)."""

import multiprocessing
import pickle
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from costmodel.errors import CostModelError
from graphs.cli.main import main
from graphs.serving.planning.bench_results import BenchRun
from graphs.serving.planning.capacity_search import max_rate
from graphs.serving.planning.executors import map_ordered
from graphs.serving.planning.serving_fit import fit_serving, simulate_with
from graphs.serving.pricing.overheads import EngineOverheads
from graphs.serving.sim.requests import Request

#: SLOs ``tiny`` on an H100 meets near 43,000 requests/s with 200 drawn requests (its ceiling,
#: the token-wise kernels back to back, is about 116,000/s): a bracket found after 16 doublings
MR = dict(slo_ttft=0.0012, slo_tpot=0.0003, requests=200, rel_tol=0.02)


def _bracket(m):
    """The last meeting and the first missing rate above it: the search's final bracket."""
    met = [r for r, ok, *_ in m.probes if ok]
    missed = [r for r, ok, *_ in m.probes if not ok and r > m.rate]
    return max(met), min(missed)


@pytest.fixture(scope="module")
def one_process():
    return max_rate("tiny", "h100", **MR)


def test_one_at_a_time_on_an_executor_is_the_bisection(one_process):
    """``at_once=1``: the same probes, in the same order, as this process's bisection."""
    with ThreadPoolExecutor(1) as ex:
        m = max_rate("tiny", "h100", **MR, executor=ex, at_once=1)
    assert [p[:2] for p in m.probes] == [p[:2] for p in one_process.probes]
    assert m.rate == one_process.rate


@pytest.mark.parametrize("at_once", [2, 3])
def test_a_k_section_finds_the_one_process_rate_to_its_tolerance(one_process, at_once):
    """Both end with a bracket [lo, hi], lo meeting, hi missing, hi / lo <= 1 + rel_tol, both
    holding the threshold rate r*: lo_a <= r* <= hi_b <= lo_b (1 + rel_tol), so the two rates
    agree to rel_tol (module doc of capacity_search)."""
    with ThreadPoolExecutor(at_once) as ex:
        m = max_rate("tiny", "h100", **MR, executor=ex, at_once=at_once)
    one = one_process
    assert one.rate is not None and m.rate is not None
    assert abs(m.rate / one.rate - 1) <= MR["rel_tol"]
    lo, hi = _bracket(m)
    assert lo == m.rate and hi / lo <= 1 + MR["rel_tol"]
    lo1, hi1 = _bracket(one)
    assert lo <= hi1 and lo1 <= hi  # the two brackets overlap: each holds the threshold
    assert m.saturated and m.ceiling_rate == one.ceiling_rate
    # the simulation at the rate is the one this process runs there
    here = max_rate("tiny", "h100", **{**MR, "rel_tol": 1e9}, start=m.rate)  # one bracket step at m.rate
    assert here.probes[0][0] == m.rate and here.probes[0][2:] == next(
        p[2:] for p in m.probes if p[0] == m.rate
    )


@pytest.mark.parametrize("at_once", [2, 3])
def test_a_first_probe_that_misses_brackets_downwards(at_once):
    """Starting above the threshold (about 43,000/s) at 50,000/s: the rounds go
    down by halvings from the lowest miss (the doublings probed with it are moot), and the rate
    is the bisection's to rel_tol."""
    one = max_rate("tiny", "h100", **MR, start=50_000.0)
    with ThreadPoolExecutor(at_once) as ex:
        m = max_rate("tiny", "h100", **MR, start=50_000.0, executor=ex, at_once=at_once)
    assert not one.probes[0][1] and not m.probes[0][1]  # 50,000/s misses
    assert len({p[0] for p in m.probes}) == len(m.probes)  # no rate probed twice
    assert one.rate is not None and m.rate is not None and abs(m.rate / one.rate - 1) <= MR["rel_tol"]


def test_probes_in_spawned_processes_know_a_user_device(fresh_catalog, one_process):
    """A device only this process knows (``--hw-file``) reaches fresh worker processes: each probe
    carries the device's spec, not its name; the rate is the one-process rate to rel_tol."""
    from costmodel.hardware import get_device, register_device

    register_device(get_device("h100").replace(name="my-h100"))
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        m = max_rate("tiny", "my-h100", **MR, executor=ex, at_once=2)
    assert m.rate is not None and abs(m.rate / one_process.rate - 1) <= MR["rel_tol"]


def test_at_once_out_of_range_is_refused():
    with pytest.raises(CostModelError, match=r"at_once .* must be a whole number in \[1, 256\], got 0"):
        max_rate("tiny", "h100", **MR, at_once=0)


def test_map_ordered_keeps_the_order():
    with ThreadPoolExecutor(3) as ex:
        assert map_ordered(ex, pow, [(2, k) for k in range(6)]) == [1, 2, 4, 8, 16, 32]  # 2**k
    assert map_ordered(None, pow, [(3, 2)]) == [9]  # 3**2, in this process


class _TwoThreadClient:
    """Dask-like (``scatter``, ``nthreads``, ``submit`` with a priority) over a pool of eight
    threads, so that every call would run at once but for :func:`map_ordered`'s window; it
    records the order calls start in and the most that ran together."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(8)
        self.lock = threading.Lock()
        self.started: list[int] = []
        self.running = self.most = 0

    def scatter(self, *a, **k):  # pragma: no cover - map_ordered sends nothing
        raise AssertionError

    def nthreads(self) -> dict[str, int]:
        return {"tcp://a": 1, "tcp://b": 1}

    def _run(self, fn, *args):
        with self.lock:
            self.started.append(args[1])
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.01)  # long enough that an unwindowed submission overlaps (not a timing assertion)
        with self.lock:
            self.running -= 1
        return fn(*args)

    def submit(self, fn, *args, priority, fifo_timeout, pure):
        return self.pool.submit(self._run, fn, *args)


def test_on_a_dask_client_a_freed_worker_takes_the_next_call():
    """At most the cluster's two threads run at once, started in ``first``'s order (the longest
    first), the results in the calls' order: 2**k for k = 0..5."""
    c = _TwoThreadClient()
    with c.pool:
        out = map_ordered(c, pow, [(2, k) for k in range(6)], first=[5, 4, 3, 2, 1, 0])
    assert out == [1, 2, 4, 8, 16, 32]
    assert c.started == [5, 4, 3, 2, 1, 0] and c.most <= 2


def test_first_must_order_every_call_once():
    with pytest.raises(
        CostModelError, match=r"first must order the 3 calls' indices, each once, got \[0, 0, 2\]"
    ):
        map_ordered(None, pow, [(2, 1), (2, 2), (2, 3)], first=[0, 0, 2])


def _runs(model="tiny"):
    """Four closed-loop runs of ``model`` served with planted CPU terms (their means only)."""
    planted = EngineOverheads(iteration_s=4e-4, per_seq_s=2e-5, request_s=6e-3)
    sim = simulate_with(model, "h100")
    runs = []
    for conc in (2, 4, 8, 16):
        reqs = [Request(i, 0.0, 128, 16) for i in range(3 * conc)]
        pr = sim(reqs, planted, conc).per_request
        n = len(reqs)
        ttft = np.full(n, pr["ttft_s"].mean())
        e2e = ttft + 15 * np.nanmean(pr["tpot_s"])
        runs.append(
            BenchRun(
                f"c{conc}", None, np.zeros(n), np.full(n, 128), np.full(n, 16), ttft, e2e, concurrency=conc
            )
        )
    return runs, sim


FIT = dict(base=EngineOverheads(), terms=("iteration_s", "per_seq_s", "request_s"), bins=1, held_out=(1,))


def test_a_fit_on_threads_is_the_one_process_fit():
    runs, sim = _runs()
    one = fit_serving(runs, sim, **FIT)
    seen = []
    with ThreadPoolExecutor(3) as ex:
        two = fit_serving(runs, sim, **FIT, executor=ex, ticks=lambda d, m: seen.append(d))
    assert two.to_dict() == one.to_dict()  # the same simulations, in the same order: the same numbers
    assert seen[:-1] == list(range(1, len(seen)))  # one tick a simulation, then the bar filled
    assert seen[-1] >= seen[-2]


def test_a_fit_in_spawned_processes_is_the_one_process_fit():
    """:func:`simulate_with`'s simulator pickles (the config, the device's spec, the predictor):
    a fresh process that imported nothing runs it."""
    runs, sim = _runs()
    one = fit_serving(runs, sim, **FIT)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        two = fit_serving(runs, sim, **FIT, executor=ex)
    assert two.to_dict() == one.to_dict()


def test_the_simulator_ships_a_workload_as_its_config():
    from graphs.serving.step.workload import as_workload

    w = as_workload("tiny")
    sim = simulate_with(w, "h100")
    back = pickle.loads(pickle.dumps(sim))
    assert back.config == w.config and back.device == sim.device and back.predictor == sim.predictor


def test_scheduler_dask_without_a_sweep_is_refused(capsys):
    assert main(["simulate", "tiny", "--rate", "5", "--requests", "10", "--scheduler", "dask"]) == 2
    assert "--scheduler dask runs --max-rate's probes" in capsys.readouterr().err


@pytest.mark.slow
def test_max_rate_a_sweep_and_a_fit_on_a_local_dask_cluster(tmp_path, capsys, one_process, sweep_one):
    """The command line's ``--scheduler dask``: the same rate to ``rel_tol`` (the default 0.02)."""
    pytest.importorskip("distributed")
    import json

    argv = ["simulate", "tiny", "--device", "h100", "--max-rate", "--requests", "200", "--slo-ttft", "0.0012"]
    argv += ["--slo-tpot", "0.0003", "--quiet", "--json"]
    assert main([*argv, "--scheduler", "dask", "--workers", "2"]) == 0
    rate = json.loads(capsys.readouterr().out)["max_rate_requests_per_s"]
    assert main(argv) == 0  # the command in one process
    rate1 = json.loads(capsys.readouterr().out)["max_rate_requests_per_s"]
    assert rate1 == one_process.rate  # the command's engine is max_rate's default for tiny on an H100
    assert abs(rate / rate1 - 1) <= 0.02
    runs, sim = _runs()
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cl, Client(cl) as c:
        two = fit_serving(runs, sim, **FIT, executor=c)
        _same(_sweep(c), sweep_one)
    assert two.to_dict() == fit_serving(runs, sim, **FIT).to_dict()


SWEEP = dict(device="h100", rates="1000,20000,60000", requests=100, slo_ttft=0.0012, slo_tpot=0.0003)


def _sweep(executor=None, **kw):
    from graphs.serving.present.simulation_report import run_simulation
    from graphs.serving.sim.simulation_request import SimulationRequest
    from models.catalog import get_model

    return run_simulation(SimulationRequest(**{**SWEEP, **kw}), get_model("tiny"), executor=executor)


def _same(a, b):
    assert len(a.runs) == len(b.runs)
    for x, y in zip(a.runs, b.runs, strict=True):
        assert x.request.rate == y.request.rate and x.to_dict() == y.to_dict()
        for k, v in x.result.per_request.items():
            np.testing.assert_array_equal(v, y.result.per_request[k])  # request by request, exactly


@pytest.fixture(scope="module")
def sweep_one():
    return _sweep()


def test_a_sweep_is_one_run_a_rate(sweep_one):
    """Each rate's run is the ``--rate`` run at that rate: the sweep adds nothing but the loop."""
    from graphs.serving.present.simulation_report import RateSweepReport

    assert isinstance(sweep_one, RateSweepReport)
    assert [r.request.rate for r in sweep_one.runs] == [1000.0, 20000.0, 60000.0]  # the order given
    alone = _sweep(rates=None, rate=20000.0)
    x = sweep_one.runs[1]
    assert x.to_dict() == alone.to_dict()
    text = sweep_one.to_text()
    assert "3 rate(s), 100 requests each" in text and "20,000" in text and "goodput" in text
    assert [d["rate_requests_per_s"] for d in sweep_one.to_dict()["rates"]] == [1000.0, 20000.0, 60000.0]


def test_a_sweep_on_threads_is_the_one_process_sweep(sweep_one):
    with ThreadPoolExecutor(3) as ex:
        _same(_sweep(ex), sweep_one)


def test_a_sweep_in_spawned_processes_knows_a_user_device(fresh_catalog):
    """The runs pickle (request, config, predictor, prices) and carry the device as this process
    resolved it: a fresh process that knows only the shipped catalog runs them."""
    from costmodel.hardware import get_device, register_device

    register_device(get_device("h100").replace(name="my-h100"))
    one = _sweep(device="my-h100", rates="1000,60000")
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        _same(_sweep(ex, device="my-h100", rates="1000,60000"), one)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"rate": 5.0}, r"--rates simulates the drawn workload at each rate; drop --rate"),
        ({"max_rate": True}, r"drop --max-rate"),
        ({"concurrency": 4}, r"drop --concurrency"),
        ({"rates": "10,x"}, r"--rates must be a comma list of rates \(requests/s\), got 'x'"),
        ({"rates": "0"}, r"rates"),
        ({"rates": ",".join(["1"] * 65)}, r"--rates takes at most 64 rates, got 65"),
        ({"csv": "out.csv"}, r"--rates prints one line a rate; drop --csv"),
    ],
)
def test_a_sweep_refuses_what_does_not_go_with_it(kw, message):
    from graphs.serving.sim.simulation_request import SimulationRequest

    with pytest.raises(CostModelError, match=message):
        SimulationRequest(**{**SWEEP, **kw})


def test_the_command_line_sweep(capsys, tmp_path):
    import json

    argv = ["simulate", "tiny", "--device", "h100", "--rates", "1000,60000", "--requests", "50", "--quiet"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["rate_requests_per_s"] for d in doc["rates"]] == [1000.0, 60000.0]
    pytest.importorskip("plotly")  # without the html extra --html stops first, naming the extra
    assert main([*argv, "--html", str(tmp_path / "x.html")]) == 2
    assert "--html draws one run's page" in capsys.readouterr().err


class _Future:
    """A future a test finishes by hand (Dask's surface: ``done``, ``result``, ``cancel``,
    ``add_done_callback``, each callback called once, when it first ends)."""

    def __init__(self, value: int) -> None:
        self.value, self.state, self.callbacks = value, "pending", []
        self.cancelled = False

    def done(self) -> bool:
        return self.state in ("done", "error")

    def result(self) -> int:
        if self.state == "error":
            raise ValueError(f"call {self.value} failed")
        return self.value

    def cancel(self) -> None:
        self.cancelled = True

    def add_done_callback(self, fn) -> None:
        self.callbacks.append(fn)

    def end(self, state: str = "done") -> None:
        self.state = state
        for fn in self.callbacks:
            fn(self)


class _HandClient:
    """Dask-like, one worker thread each for two workers; its futures end when the test says."""

    def __init__(self) -> None:
        self.futures: list[_Future] = []

    def scatter(self, *a, **k):  # pragma: no cover - map_ordered sends nothing
        raise AssertionError

    def nthreads(self) -> dict[str, int]:
        return {"tcp://a": 1, "tcp://b": 1}

    def submit(self, fn, *args, priority, fifo_timeout, pure):
        f = _Future(fn(*args))
        self.futures.append(f)
        return f


def _drain(gen, out: list) -> threading.Thread:
    t = threading.Thread(target=lambda: out.extend(gen), daemon=True)
    t.start()
    return t


def test_a_result_lost_with_its_worker_is_waited_for_without_a_second_callback(monkeypatch):
    """Dask puts a finished future back to pending when the worker holding its result dies and
    recomputes it, calling no callback again: the wait looks at the futures every POLL_S and ends."""
    from graphs.serving.planning import executors

    monkeypatch.setattr(executors, "POLL_S", 0.01)
    c = _HandClient()
    out: list[int] = []
    t = _drain(executors.iter_ordered(c, abs, [(-1,), (-2,)]), out)
    while len(c.futures) < 2:
        time.sleep(0.001)
    c.futures[1].end()  # the second ends first, its token taken ...
    c.futures[1].state = "pending"  # ... and its result is lost with its worker
    c.futures[0].end()
    time.sleep(0.05)
    c.futures[1].state = "done"  # recomputed elsewhere: no callback this time
    t.join(timeout=10)
    assert not t.is_alive() and out == [1, 2]


def test_an_error_in_one_call_cancels_the_rest_and_raises():
    from graphs.serving.planning.executors import iter_ordered

    c = _HandClient()
    gen = iter_ordered(c, abs, [(-1,), (-2,), (-3,)])
    box: list = []

    def take() -> None:
        try:
            box.extend(gen)
        except ValueError as exc:
            box.append(exc)

    t = threading.Thread(target=take, daemon=True)
    t.start()
    while len(c.futures) < 2:
        time.sleep(0.001)
    c.futures[0].end("error")
    t.join(timeout=10)
    assert not t.is_alive() and isinstance(box[0], ValueError)
    assert all(f.cancelled for f in c.futures[1:])  # the ones after it, submitted or not, cancelled


def test_a_consumer_that_stops_early_cancels_what_it_did_not_take():
    from graphs.serving.planning.executors import iter_ordered

    c = _HandClient()
    gen = iter_ordered(c, abs, [(-1,), (-2,), (-3,)])
    out = []
    t = threading.Thread(target=lambda: out.append(next(gen)), daemon=True)
    t.start()
    while len(c.futures) < 2:
        time.sleep(0.001)
    c.futures[0].end()
    t.join(timeout=10)
    gen.close()
    assert out == [1] and c.futures[1].cancelled

"""Fuzzing the surface: random and hostile command lines, hardware files and config.json files.

Every case must end in success or a one-line error within a time limit: never a traceback, never
an internal error, never a hang, never a payload executed, never a file outside the paths given.
A config.json field the loader reads with a type (a boolean, a whole number in range, a finite
number) must be refused, naming the field, whenever it holds a value of any other JSON type.
The budget is small in CI; ``COSTMODEL_FUZZ_EXAMPLES=2000`` runs a large one. The cases are the
same in every run; ``COSTMODEL_HYPOTHESIS=explore`` with ``--hypothesis-seed=N`` draws other ones
(a seed alone is ignored: the default profile derandomizes). Each test prints its tally
(``pytest -n 0 -s tests/test_fuzz.py``).
"""

from __future__ import annotations

import json
import os
import signal
import string
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.cli import build_parser, main
from graphs.cli.options import all_actions

BUDGET = int(os.environ.get("COSTMODEL_FUZZ_EXAMPLES", "40"))
LIMIT_S = 20  # one case on a loaded 2-core machine; a hang is far beyond it
FUZZ = settings(
    max_examples=BUDGET,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    # derandomize comes from the loaded profile (tests/conftest.py): "deterministic" runs the same
    # cases in every CI run; COSTMODEL_HYPOTHESIS=explore with --hypothesis-seed=N draws others
)
SLOW = {
    "probe",
    "plot",
    "calibrate",
}  # they measure, draw or fit minutes of data: fuzzed for their refusals only


class Hang(Exception):
    pass


#: a case's wall-clock limit is this many times its CPU limit: a busy machine (a 2-core runner
#: shared with other jobs gives a process 15 % of a core) must not turn a slow answer into a
#: "hang"; a true hang spins (CPU) or blocks (wall) and trips one of the two
WALL_PER_CPU = 8


@contextmanager
def time_limit(seconds: int):
    """A case's limits: ``seconds`` of this process's CPU time, ``WALL_PER_CPU`` times that of wall."""

    def cpu(signum, frame):
        raise Hang(f"no answer within {seconds} CPU s")

    def wall(signum, frame):
        raise Hang(f"no answer within {seconds * WALL_PER_CPU} s")

    old_prof = signal.signal(signal.SIGPROF, cpu)
    old_alarm = signal.signal(signal.SIGALRM, wall)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.alarm(seconds * WALL_PER_CPU)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alarm)


def _payload(marker: Path) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).touch() or 1"


def hostile(marker: Path) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            "0",
            "-1",
            "1e999",
            "-1e999",
            "nan",
            "inf",
            "9**9**9",
            "10**(10**7)",
            "(-1)**0.5",
            "1/0",
            "B",
            "",
            " ",
            "1:2",
            "1:0:2",
            "axbxcxd",
            "h100:fp8:0",
            "9" * 5000,
            "(" * 300 + "1" + ")" * 300,
            "-" * 300 + "1",
            "\x00",
            "é",
            _payload(marker),
            "../../etc/passwd",
        ]
    )


def plausible() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(-5, 70000).map(str),
        st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
        st.sampled_from(
            ["tiny", "llama-3.1-8b", "mixtral-8x7b", "h100", "b200", "groq-lpu", "bf16", "fp8", "nvfp4"]
        ),
        st.text(string.ascii_letters + string.digits + "*+-/._:,", max_size=12),
    )


def _leaves() -> dict[tuple[str, ...], list]:
    """Every runnable command path with its options."""
    parser = build_parser()
    out: dict[tuple[str, ...], list] = {}
    for prog, action in all_actions(parser):
        path = tuple(prog.split()[1:])
        if path and path[0] not in SLOW:
            out.setdefault(path, []).append(action)
    return {p: a for p, a in out.items() if not any(q[: len(p)] == p and q != p for q in out)}


LEAVES = _leaves()


@st.composite
def command_lines(draw, marker: Path, workdir: Path):
    path = draw(st.sampled_from(sorted(LEAVES)))
    argv = list(path)
    for action in LEAVES[path]:
        if action.dest in ("help", "hw_file"):
            continue
        if not action.option_strings:  # a positional: mostly a real model or device name
            argv.append(
                draw(st.one_of(st.sampled_from(["tiny", "tiny", "llama-3.1-8b", "h100"]), hostile(marker)))
            )
            continue
        if draw(st.integers(0, 3)):  # most options keep their default: deeper paths get exercised
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:  # a switch
            argv.append(flag)
        elif action.dest in ("csv", "out", "calibrated_out"):
            argv += [flag, str(workdir / draw(st.sampled_from(["a.csv", "missing/x.png", "b.json"])))]
        else:
            good = action.default if action.default not in (None, "") else "1"
            argv += [flag, draw(st.one_of(st.just(str(good)), plausible(), hostile(marker)))]
    return argv


TALLY: dict[str, dict[str, int]] = {}


def _not_json(name: str):
    raise AssertionError(f"{name} in a --json output: not JSON")


def _count(surface: str, outcome: str) -> None:
    TALLY.setdefault(surface, {}).setdefault(outcome, 0)
    TALLY[surface][outcome] += 1


def test_fuzz_the_command_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "payload-ran"

    @FUZZ
    @given(argv=command_lines(marker, tmp_path))
    def case(argv):
        before = {p for p in tmp_path.rglob("*")}
        with time_limit(LIMIT_S):
            code = main(argv)
        out, err = capsys.readouterr()
        errors = [ln for ln in err.splitlines() if "error" in ln]
        assert code in (0, 1, 2, 141), (argv, code, err[-500:])
        if code == 0 and "--json" in argv and out.strip():  # strict JSON: no NaN or Infinity
            json.loads(out, parse_constant=_not_json)
        assert "Traceback" not in err and "internal error" not in err, (argv, err[-500:])
        assert code != 2 or len(errors) == 1, (argv, err[-500:])
        assert not marker.exists(), f"payload executed by {argv}"
        new = {p for p in tmp_path.rglob("*")} - before
        allowed = {tmp_path / "a.csv", tmp_path / "b.json"}
        assert new <= allowed, (argv, new)
        _count("command line", f"exit {code}")

    case()
    print("\nfuzz tally:", json.dumps(TALLY["command line"]))


def _valid_device() -> dict:
    return {
        "roofs": [
            {"unit": "tensor", "precision": "bf16", "peak_flops_per_s": 400e12, "source": "a sheet"},
            {"unit": "vector", "precision": "fp32", "peak_flops_per_s": 50e12, "source": "a sheet"},
        ],
        "memory": [
            {"name": "dram", "bandwidth_bytes_per_s": 2e12, "capacity_bytes": 64e9, "source": "a sheet"}
        ],
        "power_w": 400,
        "power_source": "a sheet",
    }


@st.composite
def hardware_files(draw, marker: Path):
    """A valid device with zero to three fields replaced by random or hostile values."""
    value = st.one_of(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e20, max_value=1e20),
        hostile(marker),
        st.integers(-10, 10**20),
        st.sampled_from(["P", "beta", "2*P", "1e12", "80*1024**3"]),
    )
    device = _valid_device()
    fields = [
        ("roofs", 0, "peak_flops_per_s"),
        ("roofs", 0, "unit"),
        ("roofs", 1, "precision"),
        ("memory", 0, "bandwidth_bytes_per_s"),
        ("memory", 0, "capacity_bytes"),
        ("memory", 0, "name"),
    ]
    for where in draw(st.lists(st.sampled_from(fields), max_size=3)):
        key, i, field = where
        device[key][i][field] = draw(value)
    if draw(st.booleans()):
        device[draw(st.sampled_from(["power_w", "bogus", "overlap", "launch_overhead_s"]))] = draw(value)
    return {"devices": {draw(st.sampled_from(["fz", "fz2", "x y", ""])): device}}


def _file_case(path: Path, data: dict, use, surface: str, marker: Path) -> None:
    """Write ``data`` as JSON to ``path`` and ``use`` it: it loads, or a CostModelError refuses it."""
    path.write_text(json.dumps(data))
    with time_limit(LIMIT_S):
        try:
            use(path)
            _count(surface, "loaded")
        except CostModelError:
            _count(surface, "refused")
    assert not marker.exists(), f"payload executed from {surface}"


def test_fuzz_hardware_files(tmp_path):
    from costmodel import bound, load_hardware_file, op_cost

    marker = tmp_path / "payload-ran"

    def use(path):
        (hw,) = load_hardware_file(path, register=False)
        bound(op_cost("gemm", M=64, N=4096, K=4096), hw)

    @FUZZ
    @given(spec=hardware_files(marker))
    def case(spec):
        _file_case(tmp_path / "hw.json", spec, use, "hardware files", marker)

    case()
    print("\nfuzz tally:", json.dumps(TALLY["hardware files"]))


@st.composite
def hf_configs(draw, marker: Path):
    value = st.one_of(
        st.integers(-10, 100000),
        st.floats(allow_nan=True, allow_infinity=True),
        hostile(marker),
        st.none(),
        st.booleans(),
        st.lists(st.integers(0, 4), max_size=2),
    )
    base = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 176,
        "vocab_size": 256,
    }
    value = st.one_of(
        value, st.text(max_size=6), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
    )
    typed = ["tie_word_embeddings", "attention_bias", "max_position_embeddings", "rope_scaling"]
    for key in draw(
        st.lists(
            st.sampled_from(
                [*base, "head_dim", "num_local_experts", "torch_dtype", *typed, "quantization_config"]
            ),
            max_size=3,
        )
    ):
        base[key] = draw(value)
    return base


@st.composite
def catalog_configs(draw, marker: Path):
    """A shipped config of any family (MLA, MoE, hybrid, SSM ...) with up to three of its fields, or
    the per-layer pattern fields its family may read, set to random or hostile values."""
    from tests.test_family_configs_fuzz import _NAMES, PATTERN_FIELDS, resolve_config

    name = draw(st.sampled_from(_NAMES))
    cfg = resolve_config(name)
    target = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    value = st.one_of(
        st.integers(-3, 300),
        st.integers(2**31 - 2, 2**40),
        st.floats(allow_nan=True, allow_infinity=True),
        hostile(marker),
        st.none(),
        st.booleans(),
        st.lists(st.integers(0, 4), max_size=3),
        st.lists(
            st.sampled_from(["full_attention", "sliding_attention", "linear_attention", "mamba", "M", "*"]),
            max_size=6,
        ),
        st.dictionaries(
            st.sampled_from(["rope_type", "factor", "quant_method", "bits"]),
            st.one_of(st.integers(-1, 64), st.text(max_size=5), st.floats()),
            max_size=3,
        ),
    )
    keys = sorted(set(target) | set(PATTERN_FIELDS))
    for key in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
        target[key] = draw(value)
    return cfg


def test_fuzz_catalog_configs(tmp_path):
    """Every family's reader, not only Llama's (``hf_configs``): a hostile edit of a shipped config
    loads and builds a decode graph of finite, positive FLOPs and bytes, or is refused in one
    CostModelError."""
    import math

    from costmodel.graph import graph_total
    from graphs import build_model
    from models.resolver import load_hf_config

    marker = tmp_path / "payload-ran"

    def use(path):
        total = graph_total(build_model(load_hf_config(path), "decode", batch=2, ctx=64))
        for what, v in (("FLOPs", float(total.flops)), ("bytes", float(total.bytes))):
            assert math.isfinite(v) and v > 0, (path.read_text()[:300], what, v)

    @FUZZ
    @given(cfg=catalog_configs(marker))
    def case(cfg):
        _file_case(tmp_path / "config.json", cfg, use, "catalog configs", marker)

    case()
    print("\nfuzz tally:", json.dumps(TALLY["catalog configs"]))


def _wrong_bool() -> st.SearchStrategy:
    """Every JSON value that is not true/false (each once read by truthiness)."""
    return st.one_of(
        st.integers(-2, 2),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
        st.lists(st.integers(0, 1), max_size=2),
        st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2),
    )


def _wrong_int(lo: int) -> st.SearchStrategy:
    """JSON values that are not a whole number in [lo, 2**31 - 1]: booleans, floats (4096.0 too),
    strings, lists, objects and integers out of range."""
    return st.one_of(
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
        st.lists(st.integers(1, 4096), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
        st.integers(max_value=lo - 1),
        st.integers(min_value=2**31),
    )


def _wrong_factor() -> st.SearchStrategy:
    """rope_scaling.factor values that are not a finite number in [1, 1e6]."""
    return st.one_of(
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda f: not 1 <= f <= 1e6),
        st.text(max_size=6),
        st.lists(st.floats(1, 8), max_size=2),
    )


_LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 256,
}
_MAMBA2 = {
    "model_type": "mamba2",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_heads": 8,
    "head_dim": 64,
    "state_size": 16,
    "expand": 2,
    "vocab_size": 256,
}
_DEEPSEEK = json.loads((Path(__file__).parents[1] / "models" / "configs" / "deepseek-v3.json").read_text())


def _wrong_choice(allowed: tuple[str, ...]) -> st.SearchStrategy:
    """JSON values that are not one of the strings ``allowed``: other types, other spellings."""
    return st.one_of(
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.lists(st.sampled_from(allowed), max_size=2),
        st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=1),
        st.text(max_size=12).filter(lambda t: t not in allowed),
        st.sampled_from(allowed).map(str.upper),
    )


#: (base config, where the field sits: None top level or the object's key, field, its wrong values):
#: every field the config.json boundary reads with a type (models.fields), at least one per reader
TYPED_CASES = [
    (_DEEPSEEK, None, "topk_method", _wrong_choice(("greedy", "gready", "group_limited_greedy", "noaux_tc"))),
    *[(_LLAMA, None, f, _wrong_bool()) for f in ("tie_word_embeddings", "attention_bias")],
    *[(_MAMBA2, None, f, _wrong_bool()) for f in ("tie_word_embeddings", "use_conv_bias", "use_bias")],
    *[
        (_LLAMA, None, f, _wrong_int(1))
        for f in (
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "vocab_size",
            "max_position_embeddings",
        )
    ],
    (_LLAMA, None, "intermediate_size", _wrong_int(0)),
    (
        {**_LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}},
        "quantization_config",
        "sym",
        _wrong_bool(),
    ),
    (
        {**_LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}},
        "quantization_config",
        "lm_head",
        _wrong_bool(),
    ),
    (
        {**_LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}},
        "quantization_config",
        "bits",
        _wrong_int(0),
    ),
    (
        {**_LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}},
        "quantization_config",
        "group_size",
        _wrong_int(-1),
    ),
    (
        {**_LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}},
        "quantization_config",
        "zero_point",
        _wrong_bool(),
    ),
    *[
        (
            {**_LLAMA, "quantization_config": {"quant_method": "bitsandbytes"}},
            "quantization_config",
            f,
            _wrong_bool(),
        )
        for f in ("load_in_4bit", "load_in_8bit")
    ],
    (
        {**_LLAMA, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}},
        "quantization_config",
        "bnb_4bit_use_double_quant",
        _wrong_bool(),
    ),
    (
        {**_LLAMA, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
        "quantization_config",
        "weight_block_size",
        st.one_of(
            # a list of two whole numbers in range is a valid block size, not a wrong one
            _wrong_int(1).filter(lambda v: not (isinstance(v, list) and len(v) == 2)),
            st.lists(_wrong_int(1), min_size=2, max_size=2),
            st.lists(st.integers(1, 9), max_size=1),
        ),
    ),
    (
        {**_LLAMA, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        "rope_scaling",
        "factor",
        _wrong_factor(),
    ),
    (
        {**_LLAMA, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        "rope_scaling",
        "original_max_position_embeddings",
        _wrong_int(1),
    ),
]


@st.composite
def hostile_typed_configs(draw):
    """A valid config with one typed field given a value of the wrong type or out of range."""
    base, where, field, wrong = draw(st.sampled_from(TYPED_CASES))
    cfg = json.loads(json.dumps(base))  # a deep copy
    value = draw(wrong)
    (cfg if where is None else cfg[where])[field] = value
    return field, value, cfg


def test_fuzz_config_field_types():
    """Every wrong-typed value of a typed config.json field is refused, naming the field (it was once
    read by truthiness or silently costed)."""
    from models import ModelConfigError, config_from_hf_dict

    @FUZZ
    @given(case=hostile_typed_configs())
    def case(case):
        field, value, cfg = case
        with time_limit(LIMIT_S):
            try:
                config_from_hf_dict(cfg, "fz")
            except ModelConfigError as exc:
                assert field in str(exc), (field, value, str(exc))
                _count("typed config fields", "refused")
                return
        raise AssertionError(f"{field} = {value!r} was accepted")

    case()
    print("\nfuzz tally:", json.dumps(TALLY["typed config fields"]))


def test_fuzz_config_files(tmp_path):
    from graphs import build_model
    from models.resolver import load_hf_config

    marker = tmp_path / "payload-ran"

    def use(path):
        build_model(load_hf_config(path), "decode", batch=1, ctx=16)

    @FUZZ
    @given(cfg=hf_configs(marker))
    def case(cfg):
        _file_case(tmp_path / "config.json", cfg, use, "config.json files", marker)

    case()
    print("\nfuzz tally:", json.dumps(TALLY["config.json files"]))


@pytest.mark.parametrize("text", ["1" * 600, "[" * 5000, json.dumps({"a": "9" * 5000})])
def test_oversized_files_are_refused_in_one_line(tmp_path, text):
    from costmodel import load_hardware_file
    from models.resolver import load_hf_config

    (tmp_path / "f.json").write_text(text)
    for load in (load_hardware_file, load_hf_config):
        with pytest.raises(CostModelError):
            load(tmp_path / "f.json")

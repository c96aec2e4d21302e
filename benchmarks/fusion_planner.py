"""Three-way fusion audit of real compiled models: Inductor's kernels, the planner, the ideal.

For each model (tiny configs, CPU, torch 2.13, one Inductor compile each, dynamic token count)
prints DRAM bytes and the sum of kernel roofline bounds on an H100 for

* Inductor's grouping (its post-fusion kernels, priced by the engine's accounting),
* the planner under Inductor's own rules (its kernels offered too: never worse than them),
* the planner under the default rules (GEMM prologue/epilogue, FlashAttention, dual GEMM),
* the ideal (only inputs, weights and outputs cross DRAM),

then every boundary Inductor keeps that the planner removes, with the rule Inductor would have
to change; and the planner's own numbers: the exact solve's certificate and time on a
Llama-3.1-8B layer, and the heuristic on the whole 32-layer model against it.

    python -m benchmarks.fusion_planner [--models llama-prefill,gpt2,...]
    python -m benchmarks.fusion_planner --certify [--archs llama-3.1-8b,...]  # real layers
    python -m benchmarks.fusion_planner --certify --time-limit 25 --write  # docs/compiler.md
    python -m benchmarks.fusion_planner --apply [--models gpt2,...] [--write]  # realised bytes
"""

from __future__ import annotations

import argparse
import pickle
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

__all__ = ["MODELS", "capture", "main"]


def _llama_config(**kw):
    import transformers

    return _tiny(transformers.LlamaConfig, **kw)


def _tiny(config_class, **kw):
    """A tiny config of ``config_class`` (hidden 64, 4 heads of 16, 2 KV heads, one layer)."""
    base = dict(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=1,
        vocab_size=128,
        max_position_embeddings=256,
    )
    return config_class(**{**base, **kw})


def llama_layer(phase: str, attn: str = "sdpa"):
    """A Hugging Face Llama decoder layer with its rotary embedding. ``prefill``: 64 tokens, the
    token count ``S`` dynamic; ``decode``: one new token for each of ``B`` = 4 sequences against a
    ``ctx`` = 32-token cache the layer extends (as ``DynamicCache`` does, by cat), ``B`` and
    ``ctx`` dynamic."""
    import torch
    from transformers.models.llama import modeling_llama as m

    cfg = _llama_config()
    cfg._attn_implementation = attn

    class Cache:
        def __init__(self, k, v):
            self.k, self.v = k, v

        def update(self, k, v, layer_idx, *args, **kwargs):
            return torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = m.LlamaDecoderLayer(cfg, layer_idx=0)
            self.rope = m.LlamaRotaryEmbedding(cfg)

        def forward(self, x, past_k=None, past_v=None):
            start = 0 if past_k is None else past_k.shape[2]
            pos = torch.arange(start, start + x.shape[1]).unsqueeze(0)
            cache = None if past_k is None else Cache(past_k, past_v)
            return self.layer(x, position_embeddings=self.rope(x, pos), cache=cache, position_ids=pos)

    torch.manual_seed(0)
    mod = Layer().eval()
    if phase == "prefill":
        return mod, (torch.randn(1, 64, cfg.hidden_size),), (None, "S", None)
    kv = torch.randn(4, cfg.num_key_value_heads, 32, cfg.hidden_size // cfg.num_attention_heads)
    cache = ("B", None, "ctx", None)
    return (
        mod,
        (torch.randn(4, 1, cfg.hidden_size), kv, kv.clone()),
        {"x": ("B", None, None), "past_k": cache, "past_v": cache},
    )


def attention_eager():
    """Llama attention without SDPA: matmul, softmax, matmul as separate ATen ops."""
    import torch
    from transformers.models.llama import modeling_llama as m

    cfg = _llama_config()
    cfg._attn_implementation = "eager"

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = m.LlamaAttention(cfg, layer_idx=0)
            self.rope = m.LlamaRotaryEmbedding(cfg)

        def forward(self, x):
            pos = torch.arange(x.shape[1]).unsqueeze(0)
            return self.attn(x, position_embeddings=self.rope(x, pos), attention_mask=None)[0]

    torch.manual_seed(0)
    return Attn().eval(), (torch.randn(1, 64, cfg.hidden_size),), (None, "S", None)


def gpt2_block():
    import torch
    import transformers

    cfg = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=1, n_positions=256, vocab_size=128)
    cfg._attn_implementation = "sdpa"

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = transformers.models.gpt2.modeling_gpt2.GPT2Block(cfg, layer_idx=0)

        def forward(self, x):
            out = self.block(x)
            return out[0] if isinstance(out, tuple) else out

    torch.manual_seed(0)
    return Block().eval(), (torch.randn(1, 64, 64),), (None, "S", None)


def mixtral_moe():
    """Hugging Face ``MixtralSparseMoeBlock`` (4 SwiGLU experts, top-2 softmax router
    renormalised), tiny config, its experts run by transformers' ``batched_mm`` implementation
    (each token's top-k experts' weights gathered, then batched matmuls: no data-dependent loop,
    so one graph; it equals the reference expert loop to 4e-8 here). Real CPU tensors, not the
    meta device: Inductor runs the kernels it compiles on the example. 64 tokens, ``S`` dynamic."""
    import torch
    import transformers
    from transformers.models.mixtral import modeling_mixtral as m

    cfg = _tiny(transformers.MixtralConfig, num_local_experts=4, num_experts_per_tok=2)
    cfg._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    block = m.MixtralSparseMoeBlock(cfg).eval()
    for p in block.parameters():  # the experts' weights are torch.empty until a checkpoint loads
        torch.nn.init.normal_(p, std=0.05)
    return block, (torch.randn(1, 64, 64),), (None, "S", None)


def norm_linear_gelu():
    """x + GELU(Linear(LayerNorm(x))) on 64 x 256 fp32 (tests/test_inductor_audit.py's block)."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(256)
            self.lin = torch.nn.Linear(256, 256)

        def forward(self, x):
            return x + torch.nn.functional.gelu(self.lin(self.norm(x)))

    torch.manual_seed(0)
    return Block().eval(), (torch.randn(64, 256),), None


MODELS = {
    "norm-linear-gelu": norm_linear_gelu,
    "llama-prefill": lambda: llama_layer("prefill"),
    "llama-decode": lambda: llama_layer("decode"),
    "gpt2": gpt2_block,
    "mixtral-moe": mixtral_moe,
    "attention-eager": attention_eager,
}
CACHE = Path(__file__).resolve().parent.parent / "out" / "fusion_planner_cache"


def capture(name: str, recompile: bool = False):
    """Inductor's capture of model ``name``, compiled once and cached (out/, keyed by the torch
    and transformers versions): the audit itself reruns in seconds."""
    import torch
    import transformers

    from graphs.importers.inductor_audit import inductor_capture

    path = CACHE / f"{name}-torch{torch.__version__}-tf{transformers.__version__}.pkl"
    if path.exists() and not recompile:
        with path.open("rb") as f:
            return pickle.load(f)
    mod, inputs, dims = MODELS[name]()
    cap = inductor_capture(mod, inputs, "h100", dims=dims)
    CACHE.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(cap, f)
    return cap


def _audit_rows(name: str, recompile: bool = False):
    from graphs.importers.inductor_audit import audit_capture

    cap = capture(name, recompile)
    t0 = time.perf_counter()
    a = audit_capture(cap, "h100")
    return a, time.perf_counter() - t0


def _horizontal(name: str, a):
    """The planner under the default rules with horizontal GEMMs on (q/k/v as one GEMM)."""
    from costmodel.fusion_legality import get_legality
    from costmodel.fusion_plan import plan_fusions
    from costmodel.passes import bind_dims

    cap = capture(name)
    g = bind_dims(cap.point)(cap.graph) if cap.point else cap.graph
    offered = [gr.members for gr in a.planner.plan.groups]  # never above the vertical plan
    wide = get_legality("default", horizontal={"gemm"})
    return plan_fusions(g, "h100", backend=wide, objective="bytes", extra_groups=offered, max_units=32)


def _three_way(name: str, a, wide=None) -> list[tuple[str, float, float, str]]:
    from costmodel.report import fmt_si

    same, best = a.planner_same_rules, a.planner
    rows = [
        ("engine's pattern suggestion", a.engine_plan_bytes, float("nan"), "suggest_fusions"),
        (
            "inductor",
            a.inductor_plan_bytes,
            a.inductor_plan_time_s,
            f"Inductor's own count {fmt_si(a.inductor_bytes, 'B')}",
        ),
        ("planner, inductor rules", same.bytes, same.time_s, _cert(same)),
        ("planner, default rules", best.bytes, best.time_s, _cert(best)),
    ]
    if wide is not None:
        rows.append(("  + horizontal GEMMs", wide.bytes, wide.time_s, _cert(wide)))
    rows.append(("ideal", a.ideal_bytes, a.ideal_time_s, "roofline lower bound"))
    print(f"\n## {name}: {len(a.kernels)} Inductor kernels from {a.pre_fusion_nodes} scheduler nodes")
    print(a.shapes)
    if a.evaluated_at:
        print(
            f"  Inductor's grouping: {a.inductor_bytes_expr} B; planner (default rules): {a.planner_bytes_expr} B"
        )
    print(f"{'plan':28s} {'DRAM bytes':>12s} {'time (us)':>10s}  note")
    for label, b, t, note in rows:
        us = "" if t != t else f"{t * 1e6:.3f}"  # the suggestion is priced in bytes only
        print(f"{label:28s} {fmt_si(b, 'B'):>12s} {us:>10s}  {note}")
    if a.removed:
        print("boundaries Inductor keeps that the planner removes:")
        for r in a.removed:
            print(f"  {r.tensor:20s} {fmt_si(r.bytes, 'B'):>10s} {r.time_s * 1e9:8.2f} ns  {r.rule}")
    assert same.bytes <= a.inductor_plan_bytes * (1 + 1e-9), "planner moves more than Inductor"
    assert best.bytes <= same.bytes * (1 + 1e-9), "default rules move more than Inductor's rules"
    return rows


def _cert(r) -> str:
    if r.method == "exact":
        gap = f"gap {r.gap:.0e}" if r.gap is not None else "no gap"
        return f"exact ({'optimal' if r.optimal else 'not certified'}, {gap}, {r.candidates} groups, {r.solve_s:.2f} s)"
    return "heuristic"


def planner_scaling() -> None:
    """Exact on a Llama-3.1-8B layer (certified, seconds), heuristic on the 32-layer model."""
    from costmodel import get_device
    from costmodel.fusion_plan import plan_fusions
    from graphs import build_layer, build_model
    from models import get_model

    hw = get_device("h100")
    cfg = get_model("llama-3.1-8b")
    print("\n## planner on Llama-3.1-8B (engine graphs), H100")
    for phase in ("prefill", "decode"):
        layer = build_layer(cfg, phase, batch=1, seq=4096, ctx=4096)
        ex = plan_fusions(layer, hw, method="exact")
        model = build_model(cfg, phase, batch=1, seq=4096, ctx=4096)
        t0 = time.perf_counter()
        he = plan_fusions(model, hw, method="heuristic")
        th = time.perf_counter() - t0
        per_layer = sum(gr.time_s for gr in he.groups if any(m.startswith("layers.") for m in gr.members))
        per_layer /= cfg.num_hidden_layers
        print(
            f"{phase:8s} layer ({len(layer)} nodes): exact {ex.time_s * 1e6:9.2f} us, {ex.bytes / 1e6:9.2f} MB, "
            f"{_cert(ex)}; whole model heuristic ({len(model)} nodes, {th:.2f} s): layer "
            f"{per_layer * 1e6:9.2f} us = {per_layer / ex.time_s:.4f} x exact"
        )


#: real architectures for the certification table: catalog configs (models/configs), GPT-2 small
#: as transformers' own default GPT2Config (n_embd 768, 12 heads, n_inner 3072)
ARCHS = ("llama-3.1-8b", "qwen3-8b", "mixtral-8x7b", "qwen3-30b-a3b", "gemma-3-27b", "gpt2")
#: the steps: prefill of one 4,096-token prompt; decode of 8 sequences against 4,096 cached tokens
STEPS = {"prefill": {"batch": 1, "seq": 4096, "ctx": 0}, "decode": {"batch": 8, "seq": 1, "ctx": 4096}}


def _config(name: str) -> dict:
    if name == "gpt2":
        import transformers

        return transformers.GPT2Config().to_dict()
    from models.resolver import config_data

    return config_data(name)


def certify(archs=ARCHS, time_limit_s: float = 60.0, objective: str = "time") -> list[dict]:
    """The exact planner (default rules, H100) on one Hugging Face decoder layer of each
    architecture, built from its config on the meta device, per step: units, regions, candidate
    groups, solve time, gap (0: certified optimal), and the plan's DRAM bytes and time."""
    from costmodel.fusion import ideal_cost, plan_cost, unfused_plan
    from costmodel.fusion_plan import plan_fusions
    from graphs.importers.hf_layer import hf_layer_graph

    rows = []
    for name in archs:
        for phase, kw in STEPS.items():
            t0 = time.perf_counter()
            g = hf_layer_graph(
                _config(name), phase, batch=kw["batch"], seq=kw["seq"] or 1, ctx=kw["ctx"] or 1
            )
            export_s = time.perf_counter() - t0
            r = plan_fusions(g, "h100", objective=objective, time_limit_s=time_limit_s)
            row = {
                "arch": name,
                "layer": g.graph["hf_layer"]["layer"],
                "phase": phase,
                "ops": len([n for n in g if g.nodes[n].get("kind") == "op"]),
                "units": r.units,
                "regions": r.regions,
                "candidates": r.candidates,
                "solve_s": r.solve_s,
                "export_s": export_s,
                "optimal": r.optimal,
                "gap": r.gap,
                "bytes": r.bytes,
                "time_s": r.time_s,
                "unfused_bytes": float(plan_cost(g, unfused_plan(g)).bytes),
                "ideal_bytes": float(ideal_cost(g).bytes),
                "unknown": dict(g.graph.get("unknown_ops", {})),
            }
            row["certificate"] = _certificate(r)
            rows.append(row)
            print(_certify_row(row), flush=True)
    return rows


APPLY_HEADER = (
    "| block | Inductor default | applied plan, Inductor's rules (predicted) | "
    "applied plan, default rules (predicted) | ideal | outputs |\n|---|---:|---:|---:|---:|---|"
)
#: the generated realised-bytes section of docs/compiler.md (``--apply --write``)
APPLY_BEGIN, APPLY_END = "<!-- fusion-apply:begin -->", "<!-- fusion-apply:end -->"


def realised(names) -> list[dict]:
    """Both planner plans of each model applied inside Inductor
    (:func:`graphs.importers.inductor_apply.apply_plan`, CPU): Inductor's own byte count of its
    default kernels and of each applied plan's kernels, beside the planner's prediction and the
    ideal, and whether the compiled outputs equal eager's."""
    from graphs.importers.inductor_apply import apply_plan

    rows = []
    for name in names:
        a, _ = _audit_rows(name)
        mod, inputs, _dims = MODELS[name]()
        row = {"block": name, "inductor": a.inductor_bytes, "ideal": a.ideal_bytes, "allclose": True}
        for key, plan in (("same", a.planner_same_rules), ("default", a.planner)):
            ap = apply_plan(mod, inputs, [gr.members for gr in plan.groups])
            row[key] = (ap.bytes, plan.bytes, len(ap.unrealised))
            row["allclose"] = row["allclose"] and ap.allclose
        rows.append(row)
        print(_apply_row(row), flush=True)
    return rows


def _apply_row(row: dict) -> str:
    from costmodel.report import fmt_si

    def cell(v) -> str:
        got, want, split = v
        off = f"{100 * (got / want - 1):+.1f} %" if want else "-"
        return f"{fmt_si(got, 'B')} ({fmt_si(want, 'B')}, {off}; {split} groups split)"

    return (
        f"| {row['block']} | {fmt_si(row['inductor'], 'B')} | {cell(row['same'])} | {cell(row['default'])} | "
        f"{fmt_si(row['ideal'], 'B')} | {'equal to eager' if row['allclose'] else 'DIFFER from eager'} |"
    )


CERTIFY_HEADER = (
    "| architecture | step | ATen ops | units | regions | candidates | solve | certificate | unfused | plan | ideal |\n"
    "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"
)
#: the generated section of docs/compiler.md (``--certify --write``)
BEGIN, END = "<!-- fusion-certify:begin -->", "<!-- fusion-certify:end -->"


def _certificate(r) -> str:
    """``certified, gap 0`` (and by what, when the enumeration stopped), or the proven gap."""
    if r.optimal:
        return "certified, gap 0" + ("" if r.complete else " (partition floor)")
    return "gap -" if r.gap is None else f"gap {100 * r.gap:.3g} %"


def _certify_row(row: dict) -> str:
    from costmodel.report import fmt_si

    return (
        f"| {row['arch']} | {row['phase']} | {row['ops']} | {row['units']} | {row['regions']} | "
        f"{row['candidates']} | {row['solve_s']:.1f} s | {row['certificate']} | "
        f"{fmt_si(row['unfused_bytes'], 'B')} | {fmt_si(row['bytes'], 'B')} | {fmt_si(row['ideal_bytes'], 'B')} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated from {', '.join(MODELS)}")
    ap.add_argument("--no-scaling", action="store_true", help="skip the Llama-3.1-8B planner numbers")
    ap.add_argument("--recompile", action="store_true", help="compile again instead of reading the cache")
    ap.add_argument("--horizontal", action="store_true", help="also plan with horizontal GEMMs on")
    ap.add_argument(
        "--certify",
        action="store_true",
        help="the certification table: the exact planner on real HF decoder layers (meta device)",
    )
    ap.add_argument("--archs", default=",".join(ARCHS), help="with --certify: comma-separated architectures")
    ap.add_argument("--time-limit", type=float, default=60.0, help="with --certify: seconds per region")
    ap.add_argument(
        "--write",
        action="store_true",
        help="with --certify or --apply: replace the table's section in docs/compiler.md",
    )
    ap.add_argument(
        "--apply",
        action="store_true",
        help="apply both plans of each of --models inside Inductor and compare the realised bytes",
    )
    args = ap.parse_args(argv)
    if args.apply:
        print(APPLY_HEADER)
        rows = realised(args.models.split(","))
        if args.write:
            from benchmarks.replay.pages import replace_section

            text = "\n".join([APPLY_HEADER, *map(_apply_row, rows)])
            page = Path(__file__).resolve().parent.parent / "docs" / "compiler.md"
            replace_section(page, APPLY_BEGIN, APPLY_END, text)
        return 0
    if args.certify:
        print(CERTIFY_HEADER)
        rows = certify(args.archs.split(","), args.time_limit)
        if args.write:
            from benchmarks.replay.pages import replace_section

            text = "\n".join([CERTIFY_HEADER, *map(_certify_row, rows)])
            replace_section(Path(__file__).resolve().parent.parent / "docs" / "compiler.md", BEGIN, END, text)
        return 0
    table = []
    for name in args.models.split(","):
        a, secs = _audit_rows(name, args.recompile)
        wide = _horizontal(name, a) if args.horizontal else None
        table.append((name, a, _three_way(name, a, wide)))
        print(f"(audit {secs:.1f} s; the compile is cached in {CACHE.relative_to(CACHE.parent.parent)})")
    print("\n| block | " + " | ".join(r[0].strip() for r in table[0][2]) + " |")
    print("|---|" + "---:|" * len(table[0][2]))
    for name, _, rows in table:
        cells = " | ".join(
            f"{b / 1e3:.1f} KB" + ("" if t != t else f", {t * 1e6:.3f} us") for _, b, t, _ in rows
        )
        print(f"| {name} | {cells} |")
    if not args.no_scaling:
        planner_scaling()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

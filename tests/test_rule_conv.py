"""The ``conv`` rule pinned to hand counts, and the torch.export and ONNX importers pricing a
convolution net the same (both counted ``aten.conv2d`` / ``Conv`` as unknown, 0 FLOPs)."""

from __future__ import annotations

import pytest

from costmodel import RuleArgumentError, op_cost


def test_conv2d_with_bias_by_hand() -> None:
    # 2 images, 3 -> 16 channels, 3x3 kernel, 32x32 in and out (padding 1), fp32
    c = op_cost(
        "conv", batch=2, in_channels=3, out_channels=16, in_size=32 * 32, out_size=32 * 32,
        kernel_size=9, dtype="fp32", bias=True,
    )  # fmt: skip
    # one MAC per (image, out channel, out position, in channel, tap): 2*2*16*1024*3*9
    assert c.flops == 1_769_472 + 32_768  # + one bias add per output element, 2*16*1024
    # read x 4*2*3*1024 = 24,576, W 4*16*3*9 = 1,728, bias 4*16 = 64; write y 4*2*16*1024 = 131,072
    assert c.bytes == 24_576 + 1_728 + 64 + 131_072
    assert c.kernels == 1


def test_depthwise_and_transposed_conv_by_hand() -> None:
    # depthwise 3x3 on 8 channels (groups 8), 10x10 -> 8x8: each output sums 1*9 products
    d = op_cost(
        "conv", batch=1, in_channels=8, out_channels=8, groups=8, in_size=100, out_size=64,
        kernel_size=9, dtype="fp32",
    )  # fmt: skip
    assert d.flops == 2 * 8 * 64 * 9  # 9,216
    assert d.bytes == 4 * (8 * 100 + 8 * 9 + 8 * 64)
    # transposed 3x3, 4 -> 2 channels, stride 2: 5x5 -> 11x11; each input scatters into 2*9 outputs
    t = op_cost(
        "conv", batch=1, in_channels=4, out_channels=2, in_size=25, out_size=121, kernel_size=9,
        transposed=True, dtype="fp32",
    )  # fmt: skip
    assert t.flops == 2 * 4 * 25 * 2 * 9  # 3,600
    assert t.bytes == 4 * (4 * 25 + 4 * 2 * 9 + 2 * 121)


def test_conv_groups_must_divide_the_channels() -> None:
    with pytest.raises(RuleArgumentError, match="conv: in_channels 6 is not a multiple of groups 4"):
        op_cost(
            "conv", batch=1, in_channels=6, out_channels=8, groups=4, in_size=4, out_size=4, kernel_size=1
        )


def _net():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, padding=1)
            self.dw = nn.Conv2d(16, 16, 3, groups=16, bias=False)  # 32x32 -> 30x30
            self.up = nn.ConvTranspose2d(16, 4, 2, stride=2, bias=False)  # 30x30 -> 60x60

        def forward(self, x):
            return self.up(self.dw(torch.relu(self.conv(x))))

    return torch, Net().eval(), torch.randn(2, 3, 32, 32)


def _conv_flops(g) -> int:
    return sum(int(g.nodes[n]["cost"].flops) for n in g if g.nodes[n].get("op") == "conv")


# by hand (batch 2): conv 2*2*16*1024*3*9 = 1,769,472 and its bias 2*16*1024 = 32,768;
# depthwise 2*2*16*900*9 = 518,400; transposed: each of 2*16*900 inputs into 4*4 outputs, 921,600
CONV_FLOPS = 1_769_472 + 32_768 + 518_400 + 921_600


def test_torch_export_prices_every_convolution() -> None:
    torch, net, x = _net()
    from graphs.importers import from_exported_program

    g = from_exported_program(torch.export.export(net, (x,)))
    assert _conv_flops(g) == CONV_FLOPS
    assert not g.graph["unknown_ops"]
    # the same after ATen decompositions (aten.convolution with its transposed flag)
    g2 = from_exported_program(torch.export.export(net, (x,)).run_decompositions())
    assert _conv_flops(g2) == CONV_FLOPS


def test_onnx_prices_the_convolutions_as_torch_export(tmp_path) -> None:
    torch, net, x = _net()
    pytest.importorskip("onnx")
    from graphs.importers import from_onnx

    path = tmp_path / "net.onnx"
    torch.onnx.export(net, (x,), str(path), dynamo=False)
    g = from_onnx(str(path))
    assert _conv_flops(g) == CONV_FLOPS
    assert not g.graph["unknown_ops"]


def test_jax_prices_the_convolutions_as_torch() -> None:
    """The same net in JAX (NCHW, its bias an add apart): conv_general_dilated's three calls
    give the hand count without the bias; conv_transpose's input dilation is the transpose."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from graphs.importers import from_jax

    def net(x, w1, w2, w3):
        y = jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME")
        y = jax.lax.conv_general_dilated(y, w2, (1, 1), "VALID", feature_group_count=16)
        return jax.lax.conv_transpose(y, w3, (2, 2), "VALID", dimension_numbers=("NCHW", "HWIO", "NCHW"))

    args = (
        jnp.ones((2, 3, 32, 32)),
        jnp.ones((16, 3, 3, 3)),
        jnp.ones((16, 1, 3, 3)),
        jnp.ones((2, 2, 16, 4)),
    )
    g = from_jax(net, *args, weights=(1, 2, 3))
    assert not g.graph["unknown_ops"]
    assert _conv_flops(g) == CONV_FLOPS - 32_768  # the conv's bias is not in this net


@pytest.mark.slow
def test_inductor_audit_counts_a_convolution_once() -> None:
    """Inductor runs a CPU convolution as two layout copies (input, weight) and a library call,
    all three with the convolution as their origin: each kernel was priced with its FLOPs
    (3 x 225,280). The library call does them; the copies only move bytes."""
    torch = pytest.importorskip("torch")
    from graphs.importers.inductor_audit import inductor_audit

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c = torch.nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.c(x)) + 1

    a = inductor_audit(Net().eval(), (torch.randn(2, 3, 16, 16),), "h100")
    conv = 2 * 2 * 8 * 256 * 3 * 9 + 2 * 8 * 256  # the products and the bias add: 225,280
    assert [k.flops for k in a.kernels if "convolution" in k.ops and k.kind == "extern"] == [conv]
    # in all: the convolution once, relu and + 1 one op per output element each
    assert sum(k.flops for k in a.kernels) == conv + 2 * (2 * 8 * 256)


def test_pool_by_hand() -> None:
    # 2x2 max pool, 2 x 16 channels, 32x32 -> 16x16, fp32: 4 inputs combined per output
    p = op_cost("pool", outputs=2 * 16 * 256, combines=4 * 2 * 16 * 256, inputs=2 * 16 * 1024, dtype="fp32")
    assert p.flops == 32_768 and p.bytes == 4 * 2 * 16 * 1024 + 4 * 2 * 16 * 256  # 131,072 + 32,768
    # the same returning int64 indices: 8 more bytes per output
    q = op_cost(
        "pool", outputs=8192, combines=32_768, inputs=32_768, dtype="fp32", index_dtype="int64"
    )  # fmt: skip
    assert q.bytes == p.bytes + 8 * 8192


def _pool_net():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Pools(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mp = nn.MaxPool2d(3, stride=2)  # 2 x 4 x 11 x 11 -> 5 x 5, 9 inputs each
            self.ap = nn.AdaptiveAvgPool2d(3)  # 5 -> 3: windows of 2, 3, 2 per dimension

        def forward(self, x):
            return self.ap(self.mp(x))

    return torch, Pools().eval(), torch.randn(2, 4, 11, 11)


def _pool_flops(g) -> list[int]:
    return sorted(int(g.nodes[n]["cost"].flops) for n in g if g.nodes[n].get("op") == "pool")


# by hand: max pool 2*4*25 outputs x 9 = 1,800; adaptive 5 -> 3 covers (2 + 3 + 2)^2 = 49 inputs per
# (image, channel): 2*4*49 = 392 (not 2*4*25: the windows overlap by one)
POOL_FLOPS = [392, 1800]


def test_torch_export_and_onnx_price_pools_alike(tmp_path) -> None:
    torch, net, x = _pool_net()
    from graphs.importers import from_exported_program

    ep = torch.export.export(net, (x,))
    assert _pool_flops(from_exported_program(ep)) == POOL_FLOPS
    assert _pool_flops(from_exported_program(ep.run_decompositions())) == POOL_FLOPS  # with indices
    pytest.importorskip("onnx")
    from graphs.importers import from_onnx

    # ONNX has no adaptive pool of 5 -> 3 (the exporter refuses it): the max pool, then a global
    # average pool (GlobalAveragePool), 2*4*25 = 200
    glob = torch.nn.Sequential(net.mp, torch.nn.AdaptiveAvgPool2d(1))
    path = tmp_path / "pools.onnx"
    torch.onnx.export(glob, (x,), str(path), dynamo=False)
    g = from_onnx(str(path))
    assert not g.graph["unknown_ops"]
    assert (
        _pool_flops(g) == [200, 1800] == _pool_flops(from_exported_program(torch.export.export(glob, (x,))))
    )


def test_jax_reduce_window_is_a_pool() -> None:
    jax = pytest.importorskip("jax")
    from graphs.importers import from_jax

    def mp(x):
        return jax.lax.reduce_window(x, -jax.numpy.inf, jax.lax.max, (1, 1, 3, 3), (1, 1, 2, 2), "VALID")

    g = from_jax(mp, jax.numpy.ones((2, 4, 11, 11)))
    assert _pool_flops(g) == [1800] and not g.graph["unknown_ops"]


_WINDOW_POOLS = [
    ("max_pool1d", 1), ("avg_pool1d", 1), ("max_pool2d", 2), ("avg_pool2d", 2), ("max_pool3d", 3), ("avg_pool3d", 3),
]  # fmt: skip
_ADAPTIVE_POOLS = [
    ("adaptive_max_pool1d", 1), ("adaptive_avg_pool1d", 1), ("adaptive_max_pool2d", 2),
    ("adaptive_avg_pool2d", 2), ("adaptive_max_pool3d", 3), ("adaptive_avg_pool3d", 3),
]  # fmt: skip


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize(("fn", "spatial"), _WINDOW_POOLS + _ADAPTIVE_POOLS)
def test_fx_and_torch_export_price_batched_and_unbatched_pools_alike(
    fn: str, spatial: int, batched: bool
) -> None:
    """The fx importer guessed a pool's spatial dims from its output's rank (rank - 2, or rank - 1
    at rank 2): an unbatched ``max_pool2d(x, 2)`` of ``[4, 8, 8]`` got a window of 2, 128 FLOPs
    where torch.export gave 256. The count now comes from the op's name."""
    torch = pytest.importorskip("torch")
    from graphs.importers.torch_export import from_exported_program, from_graph_module

    f = getattr(torch.nn.functional, fn)

    class Pool(torch.nn.Module):
        def forward(self, x):
            return f(x, 2) if fn.startswith("adaptive") else f(x, 2, 2)  # kernel 2 (or size 2), stride 2

    # 3 channels (and 2 images), 8 per spatial dimension -> 4 (a window of 2 each) or 2 (adaptive: 4 each)
    shape = ((2,) if batched else ()) + (3,) + (8,) * spatial
    x = torch.randn(*shape)
    images = 2 if batched else 1
    if fn.startswith("adaptive"):
        by_hand = images * 3 * 2**spatial * 4**spatial  # every output combines 4 per dimension
    else:
        by_hand = images * 3 * 4**spatial * 2**spatial  # every output combines 2 per dimension
    net = Pool()
    fx = _pool_flops(from_graph_module(torch.fx.symbolic_trace(net), (x,)))
    exported = _pool_flops(from_exported_program(torch.export.export(net, (x,))))
    assert fx == exported == [by_hand]

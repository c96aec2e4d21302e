"""What a predicted step's bound share is filed under names what sits there (routed experts are
never "norms, RoPE, activations"), and the warnings travel with the coverage into JSON."""

import pytest

from costmodel.keys import OP, ROLE, Role
from graphs.serving.pricing.kernel_sources import WARN_SHARE, Coverage
from graphs.serving.pricing.predict import unmeasured_basis


@pytest.mark.parametrize(
    ("role", "word"),
    [
        (Role.EXPERT, "routed-expert GEMMs"),
        (Role.SCAN, "recurrent state updates"),
        (Role.NORM, "norms, RoPE, activations"),
    ],
)
def test_unmeasured_nodes_are_labelled_by_their_role(role, word):
    # an expert's grouped matmul is the gemm rule, but no measured family prices its role
    node = {OP: "elementwise" if role is Role.NORM else "gemm", ROLE: role}
    assert word in unmeasured_basis(node, {"dtype": "bf16"})


def test_coverage_warnings_are_in_its_dict():
    # 82 % of 1 s on the bound, 2 % on neighbours: only the bound share passes WARN_SHARE (10 %)
    cov = Coverage(0.16, 0.02, 0.82, {"n": 0.02}, {"routed-expert GEMMs": 0.82})
    assert cov.flagged == ("bound",)
    d = cov.to_dict()
    assert d["warnings"] == [
        f"82.0% of the prediction rests on the bound alone (more than {100 * WARN_SHARE:.0f}%)"
    ]
    assert d["bounds"] == {"routed-expert GEMMs": 0.82}

"""costmodel: a symbolic cost-model engine for ML inference performance.

Operators are symbolic :class:`Cost` s (FLOPs per unit, bytes per memory
level); hardware specs give several roofs; the roofline and derivation
modules classify, bound and solve in closed form.

>>> from costmodel import op_cost, get_device, bound
>>> b = bound(op_cost("gemm", M=512, N=4096, K=4096), get_device("a100"))
>>> b.kind
'tensor'

Names load on first use (PEP 562), so ``import costmodel`` and the command line's
``--help`` do not pay for sympy until an engine name is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

__version__ = "0.1.0"

#: public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    "DEFAULT_LEVEL": "cost",
    "UNITS": "cost",
    "Cost": "cost",
    "as_float": "cost",
    "bind": "cost",
    "Crossover": "derive",
    "balance_point": "derive",
    "crossover": "derive",
    "decode_attention_intensity": "derive",
    "gemm_crossover": "derive",
    "latex": "derive",
    "op_intensity": "derive",
    "split_matmul_network": "derive",
    "tile_intensity": "derive",
    "tile_compute_bound": "derive",
    "DTYPES": "dtypes",
    "DType": "dtypes",
    "dtype_bytes": "dtypes",
    "get_dtype": "dtypes",
    "CostModelError": "errors",
    "ExpressionSyntaxError": "errors",
    "HardwareSpecError": "errors",
    "InvalidDimensionError": "errors",
    "MissingRoofError": "errors",
    "RuleArgumentError": "errors",
    "SymbolicComparisonError": "errors",
    "UnboundSymbolError": "errors",
    "UnknownDeviceError": "errors",
    "UnknownDTypeError": "errors",
    "UnknownRuleError": "errors",
    "parse_expr": "expr",
    "compile_expr": "frontier",
    "pareto_mask": "frontier",
    "Catalog": "hardware",
    "Hardware": "hardware",
    "Link": "hardware",
    "MemoryLevel": "hardware",
    "Roof": "hardware",
    "catalog": "hardware",
    "device_names": "hardware",
    "get_device": "hardware",
    "load_hardware_file": "hardware",
    "register_device": "hardware",
    "use_catalog": "hardware",
    "MemoryLedger": "ledger",
    "Overhead": "ledger",
    "max_batch": "ledger",
    "max_context": "ledger",
    "Pass": "passes",
    "Pipeline": "passes",
    "Bound": "roofline",
    "achieved": "roofline",
    "bound": "roofline",
    "headroom": "roofline",
    "sensitivities": "roofline",
    "get_rule": "rules",
    "op_cost": "rules",
    "register_rule": "rules",
    "rule_names": "rules",
    "dim": "symbols",
    "Tensor": "tensor",
    "OpRoofline": "report",
    "op_roofline": "report",
    "OperatorReport": "report",
    "operator_report": "report",
}

__all__ = [
    "Cost",
    "UNITS",
    "DEFAULT_LEVEL",
    "as_float",
    "bind",
    "DType",
    "DTYPES",
    "get_dtype",
    "dtype_bytes",
    "Tensor",
    "dim",
    "parse_expr",
    "op_cost",
    "get_rule",
    "register_rule",
    "rule_names",
    "Hardware",
    "Roof",
    "MemoryLevel",
    "Link",
    "get_device",
    "device_names",
    "register_device",
    "load_hardware_file",
    "catalog",
    "Catalog",
    "use_catalog",
    "Bound",
    "bound",
    "headroom",
    "sensitivities",
    "achieved",
    "OpRoofline",
    "op_roofline",
    "OperatorReport",
    "operator_report",
    "Crossover",
    "balance_point",
    "op_intensity",
    "crossover",
    "gemm_crossover",
    "decode_attention_intensity",
    "tile_intensity",
    "tile_compute_bound",
    "split_matmul_network",
    "MemoryLedger",
    "Overhead",
    "max_batch",
    "max_context",
    "compile_expr",
    "Pass",
    "Pipeline",
    "pareto_mask",
    "latex",
    "CostModelError",
    "InvalidDimensionError",
    "UnknownDTypeError",
    "UnknownDeviceError",
    "UnknownRuleError",
    "RuleArgumentError",
    "HardwareSpecError",
    "MissingRoofError",
    "UnboundSymbolError",
    "ExpressionSyntaxError",
    "SymbolicComparisonError",
    "__version__",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


if TYPE_CHECKING:  # static analysers see the eager imports
    from .cost import DEFAULT_LEVEL, UNITS, Cost, as_float, bind
    from .derive import (
        Crossover,
        balance_point,
        crossover,
        decode_attention_intensity,
        gemm_crossover,
        latex,
        op_intensity,
        split_matmul_network,
        tile_compute_bound,
        tile_intensity,
    )
    from .dtypes import DTYPES, DType, dtype_bytes, get_dtype
    from .errors import (
        CostModelError,
        ExpressionSyntaxError,
        HardwareSpecError,
        InvalidDimensionError,
        MissingRoofError,
        RuleArgumentError,
        SymbolicComparisonError,
        UnboundSymbolError,
        UnknownDeviceError,
        UnknownDTypeError,
        UnknownRuleError,
    )
    from .expr import parse_expr
    from .frontier import compile_expr, pareto_mask
    from .hardware import (
        Catalog,
        Hardware,
        Link,
        MemoryLevel,
        Roof,
        catalog,
        device_names,
        get_device,
        load_hardware_file,
        register_device,
        use_catalog,
    )
    from .ledger import MemoryLedger, Overhead, max_batch, max_context
    from .passes import Pass, Pipeline
    from .report import OperatorReport, OpRoofline, op_roofline, operator_report
    from .roofline import Bound, achieved, bound, headroom, sensitivities
    from .rules import get_rule, op_cost, register_rule, rule_names
    from .symbols import dim
    from .tensor import Tensor

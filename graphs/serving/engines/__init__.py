"""Serving engines as registered profiles (:mod:`.profile`): one module per engine and version,
each calling :func:`register_engine`; every module of this package is imported here (``pkgutil``,
as :mod:`costmodel.rules` does), so a new engine is one module and one test, no list to update.

The wing imports only the standard library, the ``costmodel`` core and itself (an import-linter
contract in ``pyproject.toml`` keeps it so): the simulator's knobs it builds (:mod:`.knobs`) live
here, re-exported from :mod:`graphs.serving.sim.engine` and :mod:`graphs.serving.pricing.overheads`.
"""

from .knobs import (
    CPU_TERMS,
    KERNEL_SCALE_RANGE,
    POLICIES,
    REQUEST_PATH_TERMS,
    TERM_RANGES,
    TERMS,
    EngineConfig,
    EngineOverheads,
    scaled_kernels_s,
)
from .profile import (
    KV_RULES,
    OVERRIDES,
    EngineProfile,
    KVPool,
    engine_names,
    engines,
    get_engine,
    load_engines,
    register_engine,
    release_profile,
)

load_engines()  # importing each engine module registers its profile

__all__ = [
    "release_profile",
    "CPU_TERMS",
    "KERNEL_SCALE_RANGE",
    "TERM_RANGES",
    "scaled_kernels_s",
    "KV_RULES",
    "OVERRIDES",
    "POLICIES",
    "REQUEST_PATH_TERMS",
    "TERMS",
    "EngineConfig",
    "EngineOverheads",
    "EngineProfile",
    "KVPool",
    "engine_names",
    "engines",
    "get_engine",
    "register_engine",
]

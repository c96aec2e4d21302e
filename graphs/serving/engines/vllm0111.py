"""vLLM 0.11.1 and 0.11.2 (the V1 engine, ``vllm serve``): ``vllm@0.11.1``.

``vllm@0.11``'s profile (:mod:`.vllm011`, vLLM 0.11.0) with the CUDA-graph capture sizes of
https://github.com/vllm-project/vllm/pull/26016 ("cudagraph_capture_sizes related improvements",
opened 2025-10-01, after 0.11.0's branch), which 0.11.1 was the first release to ship:
``[1, 2, 4] + range(8, 256, 8) + range(256, M + 1, 16)`` with ``M = min(2 max_num_seqs, 512)``
(:func:`.vllm.vllm_capture_sizes`; 51 sizes at 512, where 0.11.0 captured 67, 8 apart to the top:
:func:`.vllm011.v010_capture_sizes`). A decode batch of more than 256 sequences pads to a
multiple of 16, not 8. The 0.11 series' ``EngineArgs._set_default_args`` the profile cites was
read at a commit that already has this rule (:mod:`.vllm011`'s module doc).

Every other default, kernel rule and CPU term is ``vllm@0.11``'s, ASSUMED unchanged in 0.11.1
and 0.11.2 (no source read here says otherwise). :func:`.profile.release_profile` names this
profile for a stated 0.11.1 or 0.11.2 release, ``vllm@0.11`` for 0.11.0 (and a bare 0.11).

>>> from graphs.serving.engines import get_engine, release_profile
>>> release_profile("vllm", "0.11.2").ref, release_profile("vllm", "0.11.0").ref
('vllm@0.11.1', 'vllm@0.11')
>>> len(get_engine("vllm@0.11.1").overheads().cudagraph_sizes), len(get_engine("vllm@0.11").overheads().cudagraph_sizes)
(51, 67)
"""

from __future__ import annotations

import dataclasses

from .profile import register_engine
from .vllm import PROFILE as V1
from .vllm import vllm_capture_sizes
from .vllm011 import PROFILE as V011

__all__ = ["CAPTURE_0111", "PROFILE"]

#: the two-step capture rule's source: vllm PR 26016, shipped from 0.11.1 (module doc)
CAPTURE_0111 = V1.sources["cudagraph_sizes"] + (
    " (vllm PR 26016, from 0.11.1; 0.11.0 captured [1, 2, 4] + range(8, M + 1, 8): vllm@0.11)"
)

PROFILE = register_engine(
    dataclasses.replace(
        V011,
        version="0.11.1",
        releases=("0.11.2",),
        label="vLLM 0.11.1-0.11.2 (V1), vllm serve, up to 1,024 sequences on a GPU of >= 70 GiB",
        cudagraph_sizes=vllm_capture_sizes,
        sources={
            **V011.sources,
            "cudagraph_sizes": CAPTURE_0111,
            "releases": "0.11.2: a patch release of 0.11.1 (vllm-project/vllm releases), after vllm PR 26016 too; "
            "its other defaults ASSUMED 0.11.0's, as 0.11.1's",
        },
    )
)

"""The recipes of the sweep tests and the sweep-over-boxes benchmark: arms the fake engine serves
(testbed/fake_engine.py), each refusing, crashing, degenerating or serving as its env says."""

from __future__ import annotations

PROFILE = """
[profiles."fake-moe"]
checkpoint = "fake-moe"
local = true
served_model_name = "fake-moe"
architecture = "mixtral"
quantization = "nvfp4"  # NVFP4 experts: a pinned MoE backend needs a sweep that measured it (lint R3)
quant_scope = "experts"
quantizer = "vendor"
weights_gb = 0.001
moe = true

[profiles."fake-moe".serving]
sampling = { temperature = 0.0 }
source = "test fake"
"""

RECIPES = (
    PROFILE
    + """
[arms."fake-serve"]
profile = "fake-moe"
device = "cpu"  # the fake engine on the local box, which has no GPU
max_model_len = 2048
max_num_seqs = 2
env = { FAKE_ENGINE_MOE_ACCEPTS = "Triton,Marlin" }

[arms."fake-refused"]
profile = "fake-moe"
device = "cpu"  # the fake engine on the local box, which has no GPU
moe_backend = "flashinfer_cutlass"
max_model_len = 2048
env = { FAKE_ENGINE_MOE_ACCEPTS = "Triton,CPU" }

[arms."fake-refused-quietly"]
profile = "fake-moe"
device = "cpu"  # the fake engine on the local box, which has no GPU
moe_backend = "marlin"
max_model_len = 2048
env = { FAKE_ENGINE_MOE_ACCEPTS = "Triton", FAKE_ENGINE_MOE_REFUSAL = "unsupported" }

[arms."fake-crash"]
profile = "fake-moe"
device = "cpu"  # the fake engine on the local box, which has no GPU
env = { FAKE_ENGINE_MODE = "crash" }

[arms."fake-degenerate"]
profile = "fake-moe"
device = "cpu"  # the fake engine on the local box, which has no GPU
env = { FAKE_ENGINE_MODE = "degenerate" }

[arms."fake-pin-triton"]  # in no sweep: launched by hand, its pin stands on what sweeps measured
profile = "fake-moe"
device = "cpu"
moe_backend = "triton"

[shapes.short]  # a name the load generator also knows (it refuses others: see the report)
input_len = 16
output_len = 4

[sweeps."fake-test"]
arms = ["fake-serve", "fake-refused", "fake-refused-quietly", "fake-crash", "fake-degenerate"]
base = "fake-serve"
pairs = [{ moe = "marlin" }]
"""
)

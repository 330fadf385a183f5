"""Recipe text the tests share: a tiny NVFP4 profile the local box's fake engine serves (tests/conftest.py
gives the local box the ``fake-moe`` model directory; testbed/fake_engine.py is the engine)."""

from __future__ import annotations

FAKE_NVFP4_PROFILE = """
[profiles."fake-nvfp4"]
checkpoint = "fake-moe"  # the model directory the local box of tests/conftest.py has
local = true
served_model_name = "fake-nvfp4"
architecture = "llama"
quantization = "nvfp4"
quantizer = "modelopt"
weights_gb = 0.001

[profiles."fake-nvfp4".serving]
sampling = { temperature = 0.0 }
source = "test fake"
"""
"""Arms name ``profile = "fake-nvfp4"``, ``device = "cpu"`` and ``linear_backend = "b12x"`` (what lint asks
of an NVFP4 checkpoint) and add their own layout."""

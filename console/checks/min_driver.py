"""Minimum Linux x86_64 driver for each CUDA toolkit release (data, not logic).

Source: NVIDIA CUDA Toolkit Release Notes, Table 3 ("CUDA Toolkit and Corresponding Driver Versions",
GA releases) and the CUDA Compatibility guide, as collected in docs/facts.md.
``MAJOR_FLOOR`` is the minor-version-compatibility floor: a binary built for any 12.x runs on a driver at
or above 525.60.13 (some features need the toolkit's own driver); 13.x needs 580 or newer. Below the
major floor nothing runs without forward-compatibility libraries, which only data-centre GPUs accept.
"""

from __future__ import annotations

MIN_DRIVER: dict[str, str] = {
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
    "13.2": "595.45.04",
}

MAJOR_FLOOR: dict[int, str] = {
    11: "450.80.02",
    12: "525.60.13",
    13: "580.65.06",
}

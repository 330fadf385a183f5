"""The quality ledger: per-item task accuracy from the harnesses, and how two runs compare.

``stats`` is the paired arithmetic and the noise floor (pure); ``read`` turns an lm-evaluation-harness or
Inspect AI output file into a ``harness.HarnessRun``. Binding a run to a launch is the service's
(console/service/quality.py), storing it the store's (console/store/quality.py), reading it back the read
model's (console/readmodel/quality.py).
"""

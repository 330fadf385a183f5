"""The console's own task suites: items in the repository, programmatic scoring, no network at run time.

``house`` is ``seed6``, the six-family suite of the campaign write-up (console/quality/suites/house.py);
``runner`` sends a suite's items to an OpenAI-compatible server with the arm's vendor profile, a token cap
and a request timeout, and scores each answer; the service binds the result to the launch
(console/service/quality.py).
"""

SUITES = ("seed6",)
"""The suites ``campaign quality run --suite`` knows."""

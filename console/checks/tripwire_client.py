"""Tripwire client: the Python the tripwire runs under (the serving env's) imports it and makes its client.

The agent starts the tripwire with the serving env's ``python`` (agents/jobs.py), since its client needs
``openai``. An env whose Python could not import it was found only at each arm's tripwire: a sweep launched
every arm, loaded every checkpoint, and ended each one "crashed". The probe asks that Python now
(agents/tripwire/runnable.py); a failure here fails the box's check, and a launch or sweep refuses a box
whose last check failed before it sends anything.
"""

from __future__ import annotations

from agents.protocol import ProbeReport
from console.checks.verdict import FAIL, OK, Verdict

CHECK = "tripwire_client"


def check_tripwire_client(probe: ProbeReport, box: str | None = None) -> list[Verdict]:
    """One verdict from the probe's ``tripwire_client``; none from an agent that predates the check. ``box``
    names the box in the fix."""
    got = probe.get("tripwire_client")
    if not isinstance(got, dict):
        return []
    python = got.get("python") or "the agent's Python"
    numbers = {
        "python": python,
        "python_version": got.get("python_version"),
        "openai_version": got.get("openai_version"),
    }
    error = got.get("error")
    if error:
        return [
            Verdict(
                CHECK,
                FAIL,
                f"{python} cannot run the tripwire's client ({error}); every arm's tripwire would fail after its "
                f"launch: install openai there ({python} -m pip install openai) or set the box's serving env "
                f"to one that has it (`campaign box set {box or 'NAME'} --serving-env DIR`)",
                {**numbers, "error": error},
            )
        ]
    return [
        Verdict(
            CHECK,
            OK,
            f"{python} (Python {got.get('python_version') or '?'}) runs the tripwire's client "
            f"(openai {got.get('openai_version') or 'version unknown'})",
            numbers,
        )
    ]

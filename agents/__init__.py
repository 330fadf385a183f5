"""The box side: the agent daemon pushed to each GPU box and everything it runs there.

Runs on the box's own Python (3.10+) with the standard library only; ``nvidia-ml-py`` and the serving
engine are used when the box has them.
"""

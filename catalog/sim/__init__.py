"""A simulated OpenAI-compatible gateway: the embedded default upstream for `bench demo`, the tests and benchmarks.

Models behave by name (catalog/sim/behaviours.py): `oracle` replays each catalog test's reference, `flawed-*`
profiles make one kind of mistake each, and `+fault` suffixes inject transport faults (catalog/sim/fault_plan.py).
See docs/sim.md.
"""

from bench.catalog.sim.gateway import RunningSim, start_sim

__all__ = ["RunningSim", "start_sim"]

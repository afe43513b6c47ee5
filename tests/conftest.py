"""Settings for the whole suite."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# Hypothesis times each example (200 ms deadline) and the generation of data (too_slow): both are wall-clock limits,
# which fail on a loaded machine with no bug to find. What the properties assert does not depend on time.
settings.register_profile("bench", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("bench")

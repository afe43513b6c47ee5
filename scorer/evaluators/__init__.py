"""The built-in evaluators; importing this package registers them all."""

import bench.scorer.evaluators.code
import bench.scorer.evaluators.json_checks
import bench.scorer.evaluators.numbers
import bench.scorer.evaluators.text
import bench.scorer.evaluators.timing
import bench.scorer.evaluators.tools
import bench.scorer.evaluators.workspace  # noqa: F401 - imported for its registrations

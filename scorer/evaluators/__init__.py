"""The built-in evaluators; importing this package registers them all."""

import scorer.evaluators.code
import scorer.evaluators.json_checks
import scorer.evaluators.numbers
import scorer.evaluators.text
import scorer.evaluators.timing
import scorer.evaluators.tools
import scorer.evaluators.workspace  # noqa: F401 - imported for its registrations

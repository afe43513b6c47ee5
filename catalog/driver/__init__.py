"""The `bench record` driver: sends catalog tests through the recording proxy, with retries, limits and resume.

Modules, one role each: config (bench.yaml + flags), client (one HTTP attempt, parsed with bench.core.parse), retry
(what is retried and how long to wait), limiter (global and per-model concurrency), conversation (one test for one
model and epoch, tool loops included), resume (what a run already holds), preflight and doctor (probing a
gateway), progress, and recorder (the whole run). See docs/record.md.
"""

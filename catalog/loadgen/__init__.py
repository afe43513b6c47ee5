"""`bench load`: the load generator. It sends a workload (the catalog, synthetic prompts, a JSONL dataset, recorded
traffic, or a source plugged in with `@workload_source`) through the recording proxy under a chosen load, level by
level, and tags every exchange with its level so that the report reads each level from the cassette (docs/load.md).
"""

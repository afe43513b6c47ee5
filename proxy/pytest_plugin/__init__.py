"""A pytest plugin: a project's own tests record their LLM traffic through bench once, then replay it offline.

Registered by the `pytest11` entry point as `bench` (disable with `-p no:bench`); docs/pytest.md is the user's guide.
Only tests marked `bench` or using its fixtures are touched. Modules, one role each:

- `settings`: the command-line and ini options and the per-test marker, as typed settings.
- `cassettes`: where a test's cassette lives, whether it is stale, and committing a new recording atomically.
- `loop`: one event loop thread per pytest process with one listening address, routing to the current test's proxy.
- `recording`: one test's recording or replay (which proxy mode, what was missed, unused or recorded).
- `network`: refusing non-loopback connections while a test replays.
- `plugin`: the pytest hooks and fixtures.

The hooks module imports neither aiohttp nor the proxy until a test uses bench, so that installing bench costs
other pytest runs nothing.
"""

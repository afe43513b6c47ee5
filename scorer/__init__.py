"""The offline scorer: re-parse recorded exchanges and score them against the catalog as it is now.

Never imports aiohttp (tests/test_style.py checks it): scoring must run with no network stack at all.
"""

"""Loads the swap in every Python process of the SDK suite run (child processes included).

tests/test_sdk_suite.py puts this folder on PYTHONPATH and sets NEXUS_SDK_SWAP=1, so a
test that starts worker processes (the SDK's cross-process tests) gets the nexus
sessions there too, not only in the pytest process.
"""

import os

if os.environ.get("NEXUS_SDK_SWAP") == "1":
    import nexus_sdk_swap  # noqa: F401

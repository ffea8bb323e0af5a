"""Test-session settings shared by every module."""

import os

from hypothesis import settings

# In CI the property tests run the same examples every time, so a red run always reproduces;
# locally they keep exploring new examples.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

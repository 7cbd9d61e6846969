from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def root() -> Path:
    return ROOT


# A property holds or not whatever the machine's load: no per-example time limit (the suite
# runs beside other work on two cores, where hypothesis' default 200 ms deadline is noise).
settings.register_profile("astra", deadline=None)
settings.load_profile("astra")

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A seeded generator, the same for every test."""
    return np.random.default_rng(0)

"""The shipped bundle equals a fresh conversion of the raw files (when ../shared/data is beside us)."""

from pathlib import Path

import numpy as np
import pytest

from featgraph.datasets.bundle import GRAPH_TOOL, PLANETOID, bundle_path, raw_arrays

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data not present")


@needs_shared
@pytest.mark.parametrize("name", PLANETOID + GRAPH_TOOL)
def test_bundle_matches_raw_source(name):
    fresh = raw_arrays(SHARED_DATA, name)
    with np.load(bundle_path(name)) as shipped:
        assert set(shipped.files) == set(fresh)
        for key, value in fresh.items():
            assert np.array_equal(shipped[key], value), key

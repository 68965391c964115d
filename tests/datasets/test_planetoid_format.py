import os
import pickle

import pytest

from featgraph.datasets.planetoid_format import _unpickle, read_planetoid
from tests.datasets.test_bundle import SHARED_DATA, needs_shared


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_restricted_unpickler_refuses_code(tmp_path):
    path = tmp_path / "evil"
    path.write_bytes(pickle.dumps(Exploit(), protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="refusing to load"):
        _unpickle(path)


@needs_shared
@pytest.mark.parametrize(
    ("name", "nodes", "edges", "features"), [("cora", 2708, 10556, 1433), ("citeseer", 3327, 9104, 3703)]
)
def test_standard_assembly_sizes(name, nodes, edges, features):
    arrays = read_planetoid(SHARED_DATA / "planetoid", name)
    assert arrays.features.shape == (nodes, features)
    assert arrays.src.size == edges
    assert arrays.test.size == 1000 and arrays.test.max() < nodes

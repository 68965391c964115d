"""Reader for the raw Planetoid files (Yang et al. 2016) with the GCN paper's standard assembly.

The files are Python 2 pickles of scipy/numpy objects. Pickles are code, so they are read with an
unpickler that only resolves numpy, scipy.sparse and builtin container classes.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

_ALLOWED_MODULE_PREFIXES = ("numpy", "scipy.sparse")
_ALLOWED_BUILTINS = {"dict", "list", "tuple", "set", "frozenset", "int", "float", "complex", "bytes", "str", "object"}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module in ("builtins", "__builtin__") and name in _ALLOWED_BUILTINS:
            return super().find_class("builtins", name)
        if module == "collections" and name in ("defaultdict", "OrderedDict"):
            return super().find_class(module, name)
        if module == "copy_reg" and name == "_reconstructor":
            return super().find_class("copyreg", name)
        if module.startswith(_ALLOWED_MODULE_PREFIXES):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a Planetoid pickle")


def _unpickle(path: Path) -> Any:
    return _RestrictedUnpickler(io.BytesIO(path.read_bytes()), encoding="latin1").load()


class PlanetoidArrays(NamedTuple):
    features: sp.csr_matrix  # (n, f), raw bag-of-words (not normalised)
    labels: np.ndarray  # (n,), argmax of the one-hot rows (0 for the unlabeled isolated test ids)
    src: np.ndarray  # directed, symmetric, self loops removed, duplicates merged (as PyG's Planetoid)
    dst: np.ndarray
    train: np.ndarray  # node ids
    val: np.ndarray
    test: np.ndarray


def read_planetoid(folder: str | Path, name: str) -> PlanetoidArrays:
    """Assemble features, labels, edges and the standard split as the GCN paper's ``load_data`` does."""
    folder = Path(folder)
    parts = {key: _unpickle(folder / f"ind.{name}.{key}") for key in ("x", "y", "tx", "ty", "allx", "ally", "graph")}
    test_index = np.loadtxt(folder / f"ind.{name}.test.index", dtype=np.int64)
    test_sorted = np.sort(test_index)
    tx, ty = parts["tx"], parts["ty"]
    if name == "citeseer":
        # some test ids are isolated and missing from tx/ty: give them zero rows
        full_range = np.arange(test_sorted.min(), test_sorted.max() + 1)
        tx_ext = sp.lil_matrix((full_range.size, tx.shape[1]), dtype=tx.dtype)
        tx_ext[test_sorted - test_sorted.min(), :] = tx
        ty_ext = np.zeros((full_range.size, ty.shape[1]), dtype=ty.dtype)
        ty_ext[test_sorted - test_sorted.min(), :] = ty
        tx, ty = tx_ext, ty_ext
    features = sp.vstack([parts["allx"], tx]).tolil()
    features[test_index, :] = features[test_sorted, :]
    one_hot = np.vstack([parts["ally"], ty])
    one_hot[test_index, :] = one_hot[test_sorted, :]
    num_nodes = features.shape[0]

    graph = parts["graph"]
    src = np.array([u for u, nbrs in graph.items() for _ in nbrs], dtype=np.int64)
    dst = np.array([v for nbrs in graph.values() for v in nbrs], dtype=np.int64)
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    keep = src != dst
    pairs = np.unique(src[keep] * num_nodes + dst[keep])
    num_classes = one_hot.shape[1]
    return PlanetoidArrays(
        features=features.tocsr().astype(np.float32),
        labels=one_hot.argmax(1).astype(np.int64),
        src=pairs // num_nodes,
        dst=pairs % num_nodes,
        train=np.arange(20 * num_classes),
        val=np.arange(parts["y"].shape[0], parts["y"].shape[0] + 500),
        test=test_sorted,
    )

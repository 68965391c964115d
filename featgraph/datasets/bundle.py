"""The compact on-disk form of the real graphs shipped in the package (``data/NAME.npz``).

``python -m featgraph.datasets.bundle SHARED_DATA_DIR`` rebuilds the bundle from the raw files in
``../shared/data`` (Planetoid pickles, graph-tool ``.gt.gz``); loaders read only the bundle, so nothing
outside the package is needed at run time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .graph_tool_format import read_gt
from .planetoid_format import read_planetoid

BUNDLE_DIR = Path(__file__).parent / "data"
PLANETOID = ("cora", "citeseer")
GRAPH_TOOL = ("email-Enron", "cond-mat-2005", "astro-ph", "as-22july06", "polblogs", "karate")


def bundle_path(name: str) -> Path:
    return BUNDLE_DIR / f"{name}.npz"


def raw_arrays(shared_data: Path, name: str) -> dict[str, np.ndarray]:
    """The arrays one bundle file holds, read from the raw source files."""
    if name in PLANETOID:
        p = read_planetoid(shared_data / "planetoid", name)
        return {
            "num_nodes": np.int64(p.features.shape[0]),
            "directed": np.bool_(True),  # already symmetrised, one entry per direction
            "src": p.src.astype(np.int32),
            "dst": p.dst.astype(np.int32),
            "feat_indptr": p.features.indptr.astype(np.int32),
            "feat_indices": p.features.indices.astype(np.int32),
            "feat_data": p.features.data.astype(np.float32),
            "feat_cols": np.int64(p.features.shape[1]),
            "labels": p.labels.astype(np.int8),
            "train": p.train.astype(np.int32),
            "val": p.val.astype(np.int32),
            "test": p.test.astype(np.int32),
        }
    g = read_gt(shared_data / "graph-tool" / f"{name}.gt.gz")
    return {
        "num_nodes": np.int64(g.num_nodes),
        "directed": np.bool_(g.directed),
        "src": g.src.astype(np.int32),
        "dst": g.dst.astype(np.int32),
    }


def features_of(arrays: dict[str, np.ndarray]) -> sp.csr_matrix:
    shape = (int(arrays["num_nodes"]), int(arrays["feat_cols"]))
    return sp.csr_matrix((arrays["feat_data"], arrays["feat_indices"], arrays["feat_indptr"]), shape=shape)


def write_bundle(shared_data: Path) -> list[Path]:
    BUNDLE_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PLANETOID + GRAPH_TOOL:
        np.savez_compressed(bundle_path(name), **raw_arrays(shared_data, name))
        written.append(bundle_path(name))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("shared_data", type=Path, help="folder with planetoid/ and graph-tool/")
    for path in write_bundle(parser.parse_args().shared_data):
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()

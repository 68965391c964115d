"""Reader for the adjacency part of graph-tool's binary ``.gt`` format (property maps are skipped).

Layout: magic ``b"\\xe2\\x9b\\xbe gt"``, version byte, endianness byte, comment (uint64 length + bytes),
directed flag (1 byte), vertex count N (uint64), then per vertex its out-degree (uint64) and the neighbour
ids, each stored in the smallest unsigned width that holds N (1, 2, 4 or 8 bytes).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

MAGIC = b"\xe2\x9b\xbe gt"


class GtGraph(NamedTuple):
    num_nodes: int
    src: np.ndarray
    dst: np.ndarray
    directed: bool
    comment: str


def _neighbour_dtype(num_nodes: int, byteorder: str) -> np.dtype:
    for bits, name in ((8, "u1"), (16, "u2"), (32, "u4")):
        if num_nodes <= 2**bits:
            return np.dtype(byteorder + name)
    return np.dtype(byteorder + "u8")


def read_gt(path: str | Path) -> GtGraph:
    """Parse a (gzip-compressed or plain) ``.gt`` file's header and edge list."""
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if raw[:6] != MAGIC:
        raise ValueError(f"{path} is not a graph-tool .gt file (bad magic)")
    byteorder = ">" if raw[7] else "<"
    u64 = np.dtype(byteorder + "u8")
    pos = 8
    comment_len = int(np.frombuffer(raw, u64, 1, pos)[0])
    pos += 8
    comment = raw[pos : pos + comment_len].decode("utf-8", "replace")
    pos += comment_len
    directed = bool(raw[pos])
    pos += 1
    num_nodes = int(np.frombuffer(raw, u64, 1, pos)[0])
    pos += 8
    ndt = _neighbour_dtype(num_nodes, byteorder)
    sources, targets = [], []
    for vertex in range(num_nodes):
        degree = int(np.frombuffer(raw, u64, 1, pos)[0])
        pos += 8
        targets.append(np.frombuffer(raw, ndt, degree, pos))
        sources.append(np.full(degree, vertex, dtype=np.int64))
        pos += degree * ndt.itemsize
    src = np.concatenate(sources) if sources else np.zeros(0, np.int64)
    dst = np.concatenate(targets).astype(np.int64) if targets else np.zeros(0, np.int64)
    stated = re.search(r"stats: (\d+) vertices, (\d+) edges", comment)
    if stated and (int(stated[1]), int(stated[2])) != (num_nodes, src.size):
        raise ValueError(f"{path}: parsed {num_nodes} vertices / {src.size} edges, header says {stated[0]}")
    if dst.size and dst.max() >= num_nodes:
        raise ValueError(f"{path}: neighbour id {dst.max()} out of range for {num_nodes} vertices")
    return GtGraph(num_nodes, src, dst, directed, comment)

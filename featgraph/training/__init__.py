"""End-to-end node classification with featgraph's layers (or PyG's, for comparison); link prediction in
``training.linkpred``."""

from .loop import Metrics, Task, build, evaluate, fit, load_model, node_task, save
from .models import BACKENDS, MODELS, PRESETS, NodeClassifier, Preset, layers, preset

__all__ = [
    "BACKENDS",
    "MODELS",
    "PRESETS",
    "Metrics",
    "NodeClassifier",
    "Preset",
    "Task",
    "build",
    "evaluate",
    "fit",
    "layers",
    "load_model",
    "node_task",
    "preset",
    "save",
]

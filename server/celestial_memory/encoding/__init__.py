"""The embedding encoders: ONNX Runtime for the bundled model, torch as the fallback and for
other models (docs/encoder.md)."""

from celestial_memory.encoding.choice import onnx_cache_dir, open_encoder
from celestial_memory.encoding.onnx_encoder import OnnxEmbedder

__all__ = ["OnnxEmbedder", "onnx_cache_dir", "open_encoder"]

"""Training methods; importing this package registers every method."""

from . import simcse  # noqa: F401
from .base import METHODS, Method, MethodOptions, StepContext, build_method, register_method

__all__ = ["METHODS", "Method", "MethodOptions", "StepContext", "build_method", "register_method"]

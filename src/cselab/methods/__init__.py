"""Training methods. Every module of this package that defines a method registers it on import, and all
of them are imported here, so a new method is one new file (nothing else to edit)."""

import importlib
import pkgutil

from cselab.methods.base import METHODS, Method, MethodOptions, StepContext, build_method, register_method

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base" and not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["METHODS", "Method", "MethodOptions", "StepContext", "build_method", "register_method"]

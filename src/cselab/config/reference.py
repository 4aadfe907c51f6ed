"""Every configuration key of a method with its default and description, generated from the pydantic schema
(:class:`~cselab.config.run_config.RunConfig` and the method's ``Options``), so the reference can never drift
from what the validator accepts (``cselab config show METHOD``).

Keys are written the way an override is (``train.lr=3e-05``): each line can be pasted onto the command line
or, nested, into a YAML preset. A sub-structure that is unset by default (e.g. TNCSE's ``pipeline``) is
listed with its own keys below it. ``method_options.loss_weights`` is listed per loss term of the method,
with the weight a term gets when the config does not name it.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cselab.config.run_config import RunConfig

REQUIRED = "<required>"
# the weight Method gives a term the config's loss_weights does not name (cselab.methods.base.Method)
UNNAMED_TERM_WEIGHT = 1.0


@dataclass(frozen=True)
class ConfigKey:
    """One key: dotted name, default (YAML text, or ``<required>``) and description with constraints."""

    key: str
    default: str
    description: str


def _yaml_value(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").strip()


def _constraints(field: FieldInfo) -> list[str]:
    """Bounds from ``Field(gt=..., ge=..., lt=..., le=...)`` (pydantic keeps them as annotated-types metadata)."""
    symbols = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    return [f"{symbols[name]} {getattr(item, name)}" for item in field.metadata
            for name in symbols if type(item).__name__.lower() == name]


def _choices(annotation: Any) -> list[str]:
    """The allowed values of a Literal annotation (inside an Optional too), else []."""
    if typing.get_origin(annotation) is Literal:
        return [str(v) for v in typing.get_args(annotation)]
    return [c for arg in typing.get_args(annotation) for c in _choices(arg)]


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The pydantic model an annotation holds (directly, optionally, in a union or as list items) and whether
    it is a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    is_list = typing.get_origin(annotation) is list
    for arg in typing.get_args(annotation):
        model, inner_list = _nested_model(arg)
        if model is not None:
            return model, is_list or inner_list
    return None, False


def _describe(field: FieldInfo, nested: type[BaseModel] | None) -> str:
    """The field's description (else the first line of its model's docstring), allowed values and bounds."""
    fallback = (nested.__doc__ or "").strip().splitlines()[0] if nested is not None and nested.__doc__ else ""
    parts = [field.description or fallback]
    choices = _choices(field.annotation)
    if choices:
        parts.append("one of: " + ", ".join(choices))
    parts.extend(_constraints(field))
    return "; ".join(p for p in parts if p)


def _walk(model: type[BaseModel], prefix: str) -> Iterator[ConfigKey]:
    for name, field in model.model_fields.items():
        key = prefix + name
        default = REQUIRED if field.is_required() else field.get_default(call_default_factory=True)
        nested, is_list = _nested_model(field.annotation)
        if nested is not None and isinstance(default, BaseModel):
            yield from _walk(nested, key + ".")  # a section that is always there (model, data, train)
            continue
        shown = default if default == REQUIRED else _yaml_value(default)
        yield ConfigKey(key, shown, _describe(field, nested))
        if nested is not None:  # a structure that is unset by default: its keys, when it is given
            yield from _walk(nested, key + ("[]." if is_list else "."))


def config_reference(method: str, method_cls: Any) -> list[ConfigKey]:
    """Every key of a ``method`` run config, in schema order: ``method``, ``model.*``, ``data.*``, ``train.*``,
    then ``method_options.*`` from the method class's ``Options`` (loss weights per ``terms``). The caller passes
    the class (``cselab.methods.METHODS.get(method)``), so configuration never imports the methods above it."""
    keys = [ConfigKey("method", method, RunConfig.model_fields["method"].description or "training method")]
    keys += [k for k in _walk(RunConfig, "") if k.key != "method" and not k.key.startswith("method_options")]
    for key in _walk(method_cls.Options, "method_options."):
        if key.key != "method_options.loss_weights":
            keys.append(key)
            continue
        named = method_cls.Options.model_fields["loss_weights"].get_default(call_default_factory=True)
        keys += [ConfigKey(f"{key.key}.{term}", _yaml_value(float(named.get(term, UNNAMED_TERM_WEIGHT))),
                           f"weight of the loss term {term!r}; 0 switches it off (not computed)")
                 for term in method_cls.terms]
    return keys


def render_config_reference(method: str, method_cls: Any) -> str:
    """The reference as text: ``KEY=DEFAULT  # description`` per line, comments aligned."""
    keys = config_reference(method, method_cls)
    width = max(len(f"{k.key}={k.default}") for k in keys)
    head = [f"# every key of a `{method}` run config: KEY=DEFAULT  # description",
            "# (an override on the command line, e.g. `cselab train --method "
            f"{method} train.lr=1e-5`, or the same key nested in a YAML preset)"]
    lines = [f"{k.key}={k.default}".ljust(width) + (f"  # {k.description}" if k.description else "") for k in keys]
    return "\n".join(head + [line.rstrip() for line in lines])

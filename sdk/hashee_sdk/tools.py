"""Tools from plain Python functions, as FastMCP does it.

``@tool(scope=…)`` reads a function's type hints into the JSON Schema (Draft 2020-12) of
its arguments, through pydantic: a closed object (``additionalProperties: false``, which
SPEC §3 requires), with defaults and ``Annotated[…, Field(…)]`` constraints kept. The
decorated function still runs as itself; :meth:`Tool.handler` is what a
:class:`~hashee_sdk.UserClient` runs: the arguments (already checked by the client against
the consented schema) validated once more into the hinted types, the result made JSON.

:func:`manifest_from_tools` writes an agent manifest's ``tools`` and ``permission_scopes``
from such tools and checks it with the package's own validator (the server's rules), so
what an owner publishes is what the device runs.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model
from pydantic_core import to_jsonable_python

from hashee_sdk.core.manifest import (
    FALLBACK_MAX_LENGTH,
    PRESET_SCOPES,
    SCHEMA_VERSION,
    SENSITIVITY_ORDER,
    TOOL_NAME_PATTERN,
    validate_manifest,
)
from hashee_sdk.errors import SdkError

ToolHandler = Callable[[Mapping[str, Any]], Any]


class ManifestInvalid(SdkError):  # noqa: N818 - named as the SDK's other errors
    """The manifest made from the tools breaks a rule of SPEC §3; ``errors`` lists each."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("the generated manifest is invalid: " + "; ".join(
            f"{error['path']} {error['code']}" for error in errors))
        self.errors = errors


@dataclass(frozen=True)
class Tool:
    """A device tool: the function, its scope and the schema of its arguments."""

    name: str
    scope: str
    function: Callable[..., Any]
    arguments: type[BaseModel]
    description: str
    sensitivity: str | None = None
    timeout_ms: int | None = None
    required: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)  # the model's generated name says nothing to a user
        return schema

    def manifest_entry(self) -> dict[str, Any]:
        """This tool as an entry of a manifest's ``tools``."""
        entry: dict[str, Any] = {"name": self.name, "description_i18n_key": f"agent.cap.{self.name}.description",
                                 "description_fallback": self.description, "input_schema": self.input_schema,
                                 "permission_scope": self.scope}
        if self.timeout_ms is not None:
            entry["timeout_ms"] = self.timeout_ms
        if self.required:
            entry["required"] = True
        return entry

    def handler(self) -> ToolHandler:
        """The callable a UserClient runs with the call's arguments (async if the function is)."""
        if inspect.iscoroutinefunction(self.function):
            async def run_async(arguments: Mapping[str, Any]) -> Any:
                return to_jsonable_python(await self.function(**self._parsed(arguments)))
            return run_async

        def run(arguments: Mapping[str, Any]) -> Any:
            return to_jsonable_python(self.function(**self._parsed(arguments)))
        return run

    def _parsed(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        model = self.arguments.model_validate(dict(arguments))
        return {field: getattr(model, field) for field in type(model).model_fields}


def tool(*, scope: str, name: str | None = None, description: str | None = None, sensitivity: str | None = None,
         timeout_ms: int | None = None, required: bool = False) -> Callable[[Callable[..., Any]], Tool]:
    """Declare a function as a tool needing ``scope``; its name and docstring are the tool's
    unless given. ``sensitivity`` is the scope's (a preset scope's defaults to the platform's)."""

    def declare(function: Callable[..., Any]) -> Tool:
        tool_name = name or function.__name__
        if not re.match(TOOL_NAME_PATTERN, tool_name):
            raise ValueError(f"a tool name must match {TOOL_NAME_PATTERN}: {tool_name!r}")
        if sensitivity is not None and sensitivity not in SENSITIVITY_ORDER:
            raise ValueError(f"sensitivity is one of {', '.join(SENSITIVITY_ORDER)}: {sensitivity!r}")
        text = description or (inspect.getdoc(function) or tool_name).split("\n\n")[0].replace("\n", " ")
        return Tool(name=tool_name, scope=scope, function=function, arguments=_arguments_model(tool_name, function),
                    description=text[:FALLBACK_MAX_LENGTH], sensitivity=sensitivity, timeout_ms=timeout_ms,
                    required=required)

    return declare


def _arguments_model(tool_name: str, function: Callable[..., Any]) -> type[BaseModel]:
    hints = typing.get_type_hints(function, include_extras=True)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise TypeError(f"{tool_name}: every argument of a tool is named (no *args, **kwargs or /)")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    model: type[BaseModel] = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return model


def handlers(tools: Iterable[Tool]) -> dict[str, ToolHandler]:
    """The ``handlers`` of a UserClient that runs ``tools``."""
    return {t.name: t.handler() for t in tools}


def manifest_from_tools(tools: Iterable[Tool], *, agent_version: str, scope_labels: Mapping[str, str] | None = None,
                        capability_flags: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """An agent manifest declaring ``tools`` and their scopes, checked by the package's own
    validator. Raises ManifestInvalid (with every error), ValueError for a scope whose
    sensitivity is unknown or declared twice differently."""
    tools = list(tools)
    manifest: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "agent_version": agent_version,
                                "tools": [t.manifest_entry() for t in tools],
                                "permission_scopes": _scopes(tools, scope_labels or {})}
    if capability_flags:
        manifest["capability_flags"] = dict(capability_flags)
    result = validate_manifest(manifest)
    if not result.valid:
        raise ManifestInvalid([error.as_dict() for error in result.errors])
    return manifest


def _scopes(tools: list[Tool], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    levels: dict[str, str] = {}
    for t in tools:
        level = t.sensitivity or PRESET_SCOPES.get(t.scope)
        if level is None:
            raise ValueError(f"{t.name}: give the sensitivity of scope {t.scope!r} (low, medium or high)")
        if levels.setdefault(t.scope, level) != level:
            raise ValueError(f"scope {t.scope!r} is declared {levels[t.scope]} and {level}")
    return [{"id": scope, "label_i18n_key": f"agent.scope.{re.sub(r'[^a-z0-9_]', '_', scope)}.label",
             "label_fallback": labels.get(scope, scope), "sensitivity": level} for scope, level in levels.items()]

"""Tools from plain Python functions, as FastMCP does it.

``@tool(scope=…)`` reads a function's type hints into the JSON Schema (Draft 2020-12) of
its arguments, through pydantic: a closed object (``additionalProperties: false``, which
SPEC §3 requires), with defaults and ``Annotated[…, Field(…)]`` constraints kept. The
decorated function still runs as itself; :meth:`Tool.handler` is what a
:class:`~hashee_sdk.UserClient` runs: the arguments (already checked by the client against
the consented schema) validated once more into the hinted types, the result made JSON.

The return annotation becomes the tool's ``output_schema`` (SPEC §10.4) as the official MCP
server (``mcp``'s MCPServer, ``func_metadata``) derives it, through pydantic's TypeAdapter: a
pydantic model, a TypedDict, a dataclass or ``dict[str, T]`` is the object itself; anything
else (``str``, ``int``, a list, a union, ``None``…) is wrapped as ``{"result": …}``, because
an output schema is an object at its top (and MCP's ``structuredContent`` is an object). The
handler validates the function's return value against it and answers the JSON of that
object. No return annotation (or ``Any``, or ``structured_output=False``): no output schema,
the value is sent as it is.

:func:`manifest_from_tools` writes an agent manifest's ``tools`` and ``permission_scopes``
from such tools and checks it with the package's own validator (the server's rules), so
what an owner publishes is what the device runs.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PydanticUserError, TypeAdapter, create_model
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaWarningKind
from pydantic_core import to_jsonable_python
from typing_extensions import is_typeddict  # typing's misses typing_extensions' TypedDicts below 3.12

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
class ToolOutput:
    """What a tool answers: the type its return value is validated against, the JSON
    Schema of the answer, and whether the value is wrapped as ``{"result": …}``."""

    adapter: TypeAdapter[Any]
    schema: dict[str, Any]
    wrapped: bool

    def answer(self, value: Any) -> Any:
        """The JSON the device sends for ``value``; raises pydantic's ValidationError when
        the value is not of the annotated type (the call then fails on the device)."""
        validated = self.adapter.validate_python({"result": value} if self.wrapped else value,
                                                 by_alias=True, by_name=True)
        if isinstance(validated, BaseModel):  # through the instance: a returned subclass keeps its fields
            return validated.model_dump(mode="json", by_alias=True)
        return self.adapter.dump_python(validated, mode="json", by_alias=True)


@dataclass(frozen=True)
class Tool:
    """A device tool: the function, its scope and the schemas of its arguments and answer."""

    name: str
    scope: str
    function: Callable[..., Any]
    arguments: type[BaseModel]
    description: str
    sensitivity: str | None = None
    timeout_ms: int | None = None
    required: bool = False
    output: ToolOutput | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)  # the model's generated name says nothing to a user
        return schema

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return dict(self.output.schema) if self.output is not None else None

    def manifest_entry(self) -> dict[str, Any]:
        """This tool as an entry of a manifest's ``tools``."""
        entry: dict[str, Any] = {"name": self.name, "description_i18n_key": f"agent.cap.{self.name}.description",
                                 "description_fallback": self.description, "input_schema": self.input_schema,
                                 "permission_scope": self.scope}
        if self.output is not None:
            entry["output_schema"] = self.output_schema
        if self.timeout_ms is not None:
            entry["timeout_ms"] = self.timeout_ms
        if self.required:
            entry["required"] = True
        return entry

    def handler(self) -> ToolHandler:
        """The callable a UserClient runs with the call's arguments (async if the function is)."""
        if inspect.iscoroutinefunction(self.function):
            async def run_async(arguments: Mapping[str, Any]) -> Any:
                return self._answer(await self.function(**self._parsed(arguments)))
            return run_async

        def run(arguments: Mapping[str, Any]) -> Any:
            return self._answer(self.function(**self._parsed(arguments)))
        return run

    def _answer(self, value: Any) -> Any:
        return self.output.answer(value) if self.output is not None else to_jsonable_python(value)

    def _parsed(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        model = self.arguments.model_validate(dict(arguments))
        return {field: getattr(model, field) for field in type(model).model_fields}


def tool(*, scope: str, name: str | None = None, description: str | None = None, sensitivity: str | None = None,
         timeout_ms: int | None = None, required: bool = False,
         structured_output: bool | None = None) -> Callable[[Callable[..., Any]], Tool]:
    """Declare a function as a tool needing ``scope``; its name and docstring are the tool's
    unless given. ``sensitivity`` is the scope's (a preset scope's defaults to the platform's).
    ``structured_output``: None (default) derives the output schema from the return
    annotation when there is one; False never does; True requires one. Raises TypeError
    for a return annotation pydantic cannot describe (say ``structured_output=False``)."""

    def declare(function: Callable[..., Any]) -> Tool:
        tool_name = name or function.__name__
        if not re.match(TOOL_NAME_PATTERN, tool_name):
            raise ValueError(f"a tool name must match {TOOL_NAME_PATTERN}: {tool_name!r}")
        if sensitivity is not None and sensitivity not in SENSITIVITY_ORDER:
            raise ValueError(f"sensitivity is one of {', '.join(SENSITIVITY_ORDER)}: {sensitivity!r}")
        text = description or (inspect.getdoc(function) or tool_name).split("\n\n")[0].replace("\n", " ")
        output = None if structured_output is False else _output(tool_name, function)
        if structured_output is True and output is None:
            raise TypeError(f"{tool_name}: structured output needs a return annotation")
        return Tool(name=tool_name, scope=scope, function=function, arguments=_arguments_model(tool_name, function),
                    description=text[:FALLBACK_MAX_LENGTH], sensitivity=sensitivity, timeout_ms=timeout_ms,
                    required=required, output=output)

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


class _StrictJsonSchema(GenerateJsonSchema):
    """Raises where pydantic would only warn (a default or type it cannot put in JSON):
    a schema that says less than the type is no output schema (as MCPServer's)."""

    def emit_warning(self, kind: JsonSchemaWarningKind, detail: str) -> None:
        raise ValueError(f"{kind}: {detail}")


def _output(tool_name: str, function: Callable[..., Any]) -> ToolOutput | None:
    """The answer's type and schema from the return annotation (None: not annotated, Any)."""
    annotation = typing.get_type_hints(function, include_extras=True).get("return", inspect.Parameter.empty)
    bare = typing.get_args(annotation)[0] if typing.get_origin(annotation) is Annotated else annotation
    if bare is inspect.Parameter.empty or bare is Any:
        return None
    wrapped = not _is_object(bare)
    try:
        target = create_model(f"{tool_name}_output", result=(annotation, ...)) if wrapped else annotation
        adapter: TypeAdapter[Any] = TypeAdapter(target)
        schema = _inline_root_ref(adapter.json_schema(schema_generator=_StrictJsonSchema))
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise TypeError(f"{tool_name}: the return annotation {annotation!r} has no JSON Schema ({exc}); "
                        "declare the tool with structured_output=False to send its value unchecked") from exc
    schema.pop("title", None)  # a generated name (read_note_output) says nothing to a model
    return ToolOutput(adapter=adapter, schema=schema, wrapped=wrapped)


def _is_object(annotation: Any) -> bool:
    """Whether values of the type are JSON objects by themselves (else they are wrapped)."""
    if typing.get_origin(annotation) is dict:
        return typing.get_args(annotation)[:1] in ((), (str,))
    return isinstance(annotation, type) and (issubclass(annotation, BaseModel) or is_typeddict(annotation)
                                             or dataclasses.is_dataclass(annotation))


def _inline_root_ref(schema: dict[str, Any]) -> dict[str, Any]:
    """A self-referential model's schema is a bare ``$ref`` into ``$defs``; an output schema
    needs an object at its top: the definition is copied there (``$defs`` kept for the
    references inside it)."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return schema
    return {**schema["$defs"][ref.removeprefix("#/$defs/")], **{k: v for k, v in schema.items() if k != "$ref"}}


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

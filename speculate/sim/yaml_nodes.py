"""Reading a scenario file's YAML nodes (not plain data), so that every error is a
:class:`~speculate.sim.scenario.ScenarioError` naming the file, the line and the reason: mappings with
their allowed keys, values, non-empty strings, required keys. The scenario parser
(:mod:`speculate.sim.scenario_yaml`) is one of these."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from speculate.sim.scenario import ScenarioError


class NodeReader:
    """Reads the nodes ``loader`` made from the file ``source``."""

    def __init__(self, source: str, loader: yaml.SafeLoader) -> None:
        self.source = source
        self.loader = loader

    def fail(self, node: yaml.Node, reason: str) -> ScenarioError:
        return ScenarioError(self.source, node.start_mark.line + 1, reason)

    def mapping(
        self, node: yaml.Node, what: str, allowed: Iterable[str] | None
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key -> (key node, value node); ``allowed`` None: any string key."""
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping")
        allowed = tuple(allowed) if allowed is not None else None
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in node.value:
            name = self.loader.construct_object(key, deep=True)
            if allowed is None and not isinstance(name, str):
                raise self.fail(key, f"key {name!r} in {what} must be a string")
            if allowed is not None and name not in allowed:
                raise self.fail(key, f"unknown key {name!r} in {what} (allowed: {', '.join(allowed)})")
            if name in out:
                raise self.fail(key, f"duplicate key {name!r} in {what}")
            out[name] = (key, value)
        return out

    def value(self, node: yaml.Node) -> Any:
        return self.loader.construct_object(node, deep=True)

    def string(self, node: yaml.Node, what: str, *, nullable: bool = False) -> str | None:
        value = self.value(node)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(node, f"{what} must be a non-empty string" + (" or null" if nullable else ""))
        return value

    def require(
        self, fields: dict[str, tuple[yaml.Node, yaml.Node]], node: yaml.Node, what: str, key: str
    ) -> yaml.Node:
        if key not in fields:
            raise self.fail(node, f"{what} is missing required key {key!r}")
        return fields[key][1]

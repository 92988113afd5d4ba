"""The vendored Linear and GitHub schemas, loaded once per test session."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from graphql import GraphQLSchema, build_client_schema, build_schema

SCHEMAS = Path(__file__).resolve().parents[1] / "contract" / "schemas"


@cache
def linear_schema() -> GraphQLSchema:
    return build_schema((SCHEMAS / "linear.graphql").read_text(encoding="utf-8"))


@cache
def github_schema() -> GraphQLSchema:
    introspection = json.loads((SCHEMAS / "github.schema.json").read_text(encoding="utf-8"))
    # The published introspection result is wrapped in {"data": ...} in some releases.
    return build_client_schema(introspection.get("data", introspection), assume_valid=True)

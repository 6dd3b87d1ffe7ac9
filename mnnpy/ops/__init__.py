"""Op schemas and shape functions (the SizeComputer's rules), one module per op family."""

from mnnpy.ops.registry import (
    REQUIRED,
    Attr,
    In,
    OpSchema,
    ShapeContext,
    aliasing_ops,
    all_schemas,
    get_schema,
    op_schema,
    resolve_attrs,
)

__all__ = [
    "REQUIRED",
    "Attr",
    "In",
    "OpSchema",
    "ShapeContext",
    "aliasing_ops",
    "all_schemas",
    "get_schema",
    "op_schema",
    "resolve_attrs",
]

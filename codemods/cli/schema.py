"""`codemod schema`: print the JSON Schema of a command's --format json output."""

from __future__ import annotations

import typer

from codemods.cli.common import out
from codemods.render.document import SCHEMAS, schema as schema_text


def schema(
    command: str = typer.Argument(..., help=f"One of: {', '.join(SCHEMAS)} (error: what any command prints on failure)."),
) -> None:
    """Print the JSON Schema of a command's --format json output.

    Examples:

    \b
      codemod schema run > run.schema.json
    """
    out(schema_text(command))

"""The largest functions and classes of a source tree, by line span (from ``def``/``class`` to
their last line, docstrings and comments included), and how many are over 60 lines.

    python scripts/code_sizes.py src/hivemesh [N]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def spans(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(functions, classes)``: ``(lines, "path:name")`` of every one below ``root``."""
    funcs: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            span = (getattr(node, "end_lineno", 0) or 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                funcs.append((span, f"{path.relative_to(root)}:{node.name}"))
            elif isinstance(node, ast.ClassDef):
                classes.append((span, f"{path.relative_to(root)}:{node.name}"))
    return funcs, classes


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "src/hivemesh")
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    for title, items in zip(("functions", "classes"), spans(root), strict=True):
        items.sort(reverse=True)
        print(f"## largest {title}")
        for lines, name in items[:top]:
            print(f"{lines:5d}  {name}")
        print(f"   over 60 lines: {sum(1 for lines, _ in items if lines > 60)}")


if __name__ == "__main__":
    main()

"""Lines of code in a package: lines holding a token that is not a comment, and not part of a
module's, class's or function's docstring (blank lines do not count either).

    python benchmarks/code_lines.py [FOLDER]      (default: functai/ of this checkout)
"""

from __future__ import annotations

import ast
import io
import pathlib
import sys
import tokenize

_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def _docstring_lines(source: str) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(source: str) -> int:
    docs = _docstring_lines(source)
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _SKIPPED:
            lines.update(line for line in range(token.start[0], token.end[0] + 1) if line not in docs)
    return len(lines)


def main(folder: pathlib.Path) -> int:
    return sum(code_lines(path.read_text(encoding="utf-8")) for path in sorted(folder.rglob("*.py")))


if __name__ == "__main__":
    where = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "functai"
    print(f"{main(where)} code lines in {where}")

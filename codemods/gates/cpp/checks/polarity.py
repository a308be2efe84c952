"""What a C++ condition means for the code it guards: whether that code runs where it is true or false.

The rule is python_arch_test's (`python.polarity`), for tree-sitter's C++: an `if`
whose body ends the code path guards the code after it, which runs where the
condition is false:

    if (sm == 120) {
      throw std::invalid_argument("not supported on SM120");   // the code after runs on every arch but sm_120
    }
    if (sm_version < 100 || sm_version >= 110 || !tmaOk()) {
      return false;                                            // the code after needs 100 <= sm_version < 110
    }

A body ends the path when its last statement throws, returns a false or
error value (`false`, `0`, `nullptr`, `std::nullopt`, a name or call saying
error, failure, invalid or unsupported), calls `abort`/`exit`, or is a
check-failure macro (`TVM_FFI_THROW(...)`, `..._ERROR(...)`, `LOG(FATAL)`,
`TORCH_CHECK(false, ...)`); or when it is nothing but `return;`, `continue;`
or `break;` (after other statements those end the guarded path's own work:
`if (sm_version >= 90) { ...dispatch...; return; }` in FlashInfer's
moe_gemm_template_dispatch.h). A body that returns another value (`if
(sm_version == 120) return (int)tile_config_sm120;`, or an empty `return
{};`, as python_arch_test reads `return []`) is the guarded path itself.

Pure: tree-sitter nodes in, words out.
"""

from __future__ import annotations

import re

import tree_sitter

_FALSE = {"false", "0", "nullptr", "NULL", "std::nullopt", "nullopt"}  # python_arch_test's false constants
_ERROR_NAME = re.compile(r"error|fail|invalid|unsupported|notsupported", re.IGNORECASE)
_EXIT_CALLS = {"abort", "exit", "_exit", "quick_exit", "terminate", "__trap", "__builtin_trap"}
_FAILURE_MACRO = re.compile(r"(?:^|_)(?:THROW|FAIL|FATAL|ERROR|UNREACHABLE)$")
_CHECK_MACRO = re.compile(r"^(?:[A-Z][A-Z0-9_]*_)?I?CHECK$|^assert$")


def _text(node: tree_sitter.Node) -> str:
    return "".join((node.text or b"").decode("utf-8", "replace").split())


def _last_name(node: tree_sitter.Node) -> str:
    """The last name of a callee or value: `std::abort` -> abort, `Status::kErrorArch` -> kErrorArch."""
    return re.split(r"::|\.|->", _text(node))[-1]


def _head_call(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The call a statement's expression is, or starts a `<<` chain with (`TVM_FFI_THROW(E) << "msg"`)."""
    while node.type == "binary_expression" and node.child_by_field_name("left") is not None:
        node = node.child_by_field_name("left")  # type: ignore[assignment]
    return node if node.type == "call_expression" else None


def _failure_call(call: tree_sitter.Node) -> bool:
    function = call.child_by_field_name("function")
    arguments = call.child_by_field_name("arguments")
    if function is None:
        return False
    name = _last_name(function)
    first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
    if name in _EXIT_CALLS or _FAILURE_MACRO.search(name):
        return True
    if name == "LOG" and first is not None and _text(first) == "FATAL":
        return True
    return bool(_CHECK_MACRO.match(name)) and first is not None and _text(first) in ("false", "0")


def _error_value(value: tree_sitter.Node) -> bool:
    if _text(value) in _FALSE:
        return True
    call = _head_call(value)
    name = value if call is None else call.child_by_field_name("function")
    return name is not None and name.type in ("identifier", "qualified_identifier", "field_expression") and bool(
        _ERROR_NAME.search(_last_name(name))
    )


def exit_of(statement: tree_sitter.Node | None) -> str | None:
    """What ends the code path in an `if`'s body (`throw`, `return false`, `TVM_FFI_THROW(...)`), or None when
    the body does not end it (or `statement` is no `if`)."""
    if statement is None or statement.type != "if_statement":
        return None
    consequence = statement.child_by_field_name("consequence")
    statements = [consequence] if consequence is not None else []
    if consequence is not None and consequence.type == "compound_statement":
        statements = [child for child in consequence.named_children if child.type != "comment"]
    if not statements:
        return None
    last, alone = statements[-1], len(statements) == 1
    if last.type == "throw_statement":
        return "throw"
    if last.type in ("break_statement", "continue_statement") and alone:
        return last.type.removesuffix("_statement")
    if last.type == "return_statement":
        values = [child for child in last.named_children if child.type != "comment"]
        if not values:
            return "return" if alone else None
        if not _error_value(values[0]):
            return None
        value = _text(values[0])
        return f"return {value}" if len(value) <= 40 else "return an error value"
    if last.type == "expression_statement" and last.named_children:
        call = _head_call(last.named_children[0])
        if call is not None and _failure_call(call):
            function = call.child_by_field_name("function")
            return _text(function) if function is not None else None
    return None

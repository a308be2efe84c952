"""The C++/CUDA gate kinds and what only they use.

Kinds (each module is its kind's entry point, registered in `codemods.gates.registry`):
`cuda_guard` (`#if` conditions on `__CUDA_ARCH__`), `cpp_runtime_check` (host-side
compute-capability checks, read with tree-sitter) and `cpp_replace` (an edit kind).
Beside them: `if_layout` (how a widened `#if` is laid out), `wrap` (a long C++ line
broken as clang-format breaks it) and `checks/` (what a runtime check's condition
says, what it means for the code it guards, and how it is widened).
"""

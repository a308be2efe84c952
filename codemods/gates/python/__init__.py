"""The Python gate kinds and what they share.

Kinds (each module is its kind's entry point, registered in `codemods.gates.registry`):
`python_arch_list`, `python_arch_or`, `python_arch_test`, `python_arch_call`,
`python_arch_map`, `python_capability`, `python_min_capability`, `python_predicate`.
Shared by them: `ast_text` (the stdlib `ast` tree of a source and where its nodes are),
`cst_source` (libcst plumbing), `polarity` (whether a guarded path runs where a
condition is true or false) and `imports` (adding names to `from ... import` lines).
Concepts, one folder each: `capability/` (compute-capability comparisons),
`predicates/` (arch predicates: reading their definitions, naming new ones),
`lists/` (lists of archs) and `layout/` (where text goes in a file and how a long
line is split).
"""

"""The `codemod` command: one module per command, each parses options, calls one service and renders."""

import gc

# A command is a short process that builds many small objects (syntax trees, parsed modules) and few reference
# cycles: the collector's default (a pass every 700 allocations) spends a tenth of `codemod run`'s CPU finding
# none. Set here, before the command's imports (bench/commands.py measures it).
gc.set_threshold(50_000, 20, 20)

"""The `codemod` command: one module per command, each parses options, calls one service and renders."""

import gc

# A command is a short process that builds many objects (syntax trees, parsed modules) and few reference cycles
# (no walk that calls itself is a nested function: tests/test_package_shape.py): the collector's default (a pass
# every 700 allocations) spent a tenth of `codemod run`'s CPU finding none, and a pass every 50,000 still a tenth of
# a cold scan's (FlashInfer 0.7.4, --jobs 1: 43-47 s user CPU against 38-42 s at 500,000, the same peak RSS within
# 3 MB). Set here, before the command's imports; the scan's workers are forked with it (bench/commands.py and
# bench/scan.py measure it).
gc.set_threshold(500_000, 50, 20)

"""The `codemod` command: one module per command, each parses options, calls one service and renders."""

"""The planner: which files, which gates, which edits a recipe makes on a project tree; it reads, never writes."""

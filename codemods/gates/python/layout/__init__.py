"""Where things are and where text goes in a Python file's bytes (`text`), and Black's split of a line a
widening made too long (`wrap`)."""

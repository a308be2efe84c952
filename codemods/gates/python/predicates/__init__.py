"""Arch predicates (`is_sm90a_supported(device)`, `_has_sm100`): what one admits, read from its definition
(`reading`, run by `evaluation`); one as a gate names it (`named`); the new ones a widened gate gains
(`gained`); and the `calls` selector of python_arch_test (`calls`)."""

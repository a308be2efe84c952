"""cpp_runtime_check's concepts: the comparisons a C++ condition holds (`conditions`), whether the code it
guards runs where it is true or false (`polarity`), and the rewrites that widen it (`widening`)."""

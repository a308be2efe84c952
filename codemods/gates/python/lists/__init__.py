"""python_arch_list's concepts: reading a Python list of archs (`reading`) and placing new entries in it
in the list's own style (`insertion`)."""

"""Gate kinds of CMake files (CMakeLists.txt, *.cmake): `cmake_arch_list`."""

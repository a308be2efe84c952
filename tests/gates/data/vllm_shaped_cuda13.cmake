# The same kind of file in the shape of a later vLLM release (own text):
# CUDA 13 builds use family targets, older compilers keep per-arch lists.
cmake_minimum_required(VERSION 3.26)
project(shaped_extensions LANGUAGES CXX)

if(DEFINED CMAKE_CUDA_COMPILER_VERSION AND
   CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 13.0)
  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0;10.0;11.0;12.0")
else()
  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0;10.0;10.3;12.0;12.1")
endif()

if(${CMAKE_CUDA_COMPILER_VERSION} VERSION_GREATER_EQUAL 13.0)
  cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0f;11.0f;12.0f" "${CUDA_ARCHS}")
else()
  cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.3a" "${CUDA_ARCHS}")
endif()

#[[ kept for reference:
cuda_archs_loose_intersection(OLD_ARCHS "9.0a" "${CUDA_ARCHS}")
]]
cuda_archs_loose_intersection(MARLIN_FP8_ARCHS "8.9;12.0" "${CUDA_ARCHS}")  # sm89 and RTX 50
cuda_archs_loose_intersection(MLA_ARCHS "10.0a;10.3a" "${CUDA_ARCHS}")

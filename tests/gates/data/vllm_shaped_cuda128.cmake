# A build file in the shape of vLLM's CMakeLists.txt of its CUDA 12.8 releases
# (own text, written for these tests): per-kernel arch lists filtered by the
# archs of the build with cuda_archs_loose_intersection.
cmake_minimum_required(VERSION 3.26)
project(shaped_extensions LANGUAGES CXX)

set(HIP_SUPPORTED_ARCHS "gfx90a;gfx942")

if(DEFINED CMAKE_CUDA_COMPILER_VERSION AND
   CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0;10.0;10.1;12.0")
else()
  set(CUDA_SUPPORTED_ARCHS "8.0;8.6;8.9;9.0")
endif()

cuda_archs_loose_intersection(CUDA_ARCHS
  "${CUDA_SUPPORTED_ARCHS}" "${CUDA_ARCHS}")

# marlin: one build for every later minor
cuda_archs_loose_intersection(MARLIN_ARCHS "8.0;9.0" "${CUDA_ARCHS}")

# hopper-only kernels
cuda_archs_loose_intersection(SCALED_MM_ARCHS "9.0a;" "${CUDA_ARCHS}")
if(SCALED_MM_ARCHS)
  list(APPEND SCALED_MM_3X_ARCHS "${SCALED_MM_ARCHS}")
endif()

# blackwell scaled_mm
cuda_archs_loose_intersection(SCALED_MM_ARCHS "10.0a;10.1a;12.0a" "${CUDA_ARCHS}")

# nvfp4
cuda_archs_loose_intersection(FP4_ARCHS "10.0a;12.0a" "${CUDA_ARCHS}")
message(STATUS "Building NVFP4 for archs: ${FP4_ARCHS}")

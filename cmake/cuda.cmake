# cmake/cuda.cmake - the GPU part of coll (COLL_CUDA), included by the top
# CMakeLists.txt once the coll_objects and coll_internal targets exist.
#
# nvcc compiles only device code here: src/device/kernels.cu becomes a fatbin
# (SASS for every architecture of COLL_CUDA_ARCHS, PTX for the last one so
# that newer GPUs can JIT it) that src/device/fatbin_data.c embeds with
# .incbin. The host side is plain C that reaches the driver through dlopen
# (src/device/cuda_loader.c), so libcoll links no CUDA library and loads on
# machines without a GPU or driver. Only <cuda.h> is needed at build time.
set(COLL_CUDA "AUTO" CACHE STRING "GPU support (CUDA kernels, P2P transport): AUTO (when a CUDA toolkit >= 12 is found), ON, OFF")
set_property(CACHE COLL_CUDA PROPERTY STRINGS AUTO ON OFF)
set(COLL_CUDA_ARCHS "80;90;100" CACHE STRING "GPU architectures (compute capability x 10) of the embedded kernels: SASS for each, PTX for the last")

string(TOUPPER "${COLL_CUDA}" _coll_cuda)
set(COLL_HAVE_CUDA OFF)
if(NOT _coll_cuda MATCHES "^(OFF|0|NO|FALSE|N)$")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE AND CUDAToolkit_VERSION VERSION_GREATER_EQUAL 12.0)
    set(COLL_HAVE_CUDA ON)
  elseif(NOT _coll_cuda STREQUAL "AUTO")
    message(FATAL_ERROR "COLL_CUDA=${COLL_CUDA}: no CUDA toolkit 12.0 or newer with nvcc found (set CUDAToolkit_ROOT)")
  endif()
endif()

if(NOT COLL_HAVE_CUDA)
  message(STATUS "coll: CUDA support off (COLL_CUDA=${COLL_CUDA}); libcoll handles host memory only")
  return()
endif()

set(_fatbin ${CMAKE_CURRENT_BINARY_DIR}/coll_kernels.fatbin)
set(_gencode "")
set(_archs_str "")
foreach(a IN LISTS COLL_CUDA_ARCHS)
  list(APPEND _gencode -gencode arch=compute_${a},code=sm_${a})
  string(APPEND _archs_str "sm_${a} ")
endforeach()
list(GET COLL_CUDA_ARCHS -1 _last)
list(APPEND _gencode -gencode arch=compute_${_last},code=compute_${_last})
string(APPEND _archs_str "compute_${_last}")
set(_nvcc_werror "")
if(COLL_WERROR)
  set(_nvcc_werror -Werror all-warnings)
endif()
# --fmad=false: no fused multiply-add contraction, so the kernels round as
# the host does; no --use_fast_math: subnormals and IEEE division kept.
add_custom_command(OUTPUT ${_fatbin}
  COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -fatbin -std=c++17 -O3 --fmad=false ${_gencode} ${_nvcc_werror}
          -I${CMAKE_CURRENT_SOURCE_DIR}/src -I${CMAKE_CURRENT_SOURCE_DIR}/include
          -o ${_fatbin} ${CMAKE_CURRENT_SOURCE_DIR}/src/device/kernels.cu
  DEPENDS src/device/kernels.cu src/device/kernel_names.h src/reduce/reduce_math.h include/coll.h
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  COMMENT "nvcc: coll's kernels for ${_archs_str}"
  VERBATIM)
add_custom_target(coll_fatbin DEPENDS ${_fatbin})
add_dependencies(coll_objects coll_fatbin)
set_source_files_properties(src/device/fatbin_data.c PROPERTIES
  OBJECT_DEPENDS ${_fatbin}
  COMPILE_DEFINITIONS "COLL_FATBIN_PATH=\"${_fatbin}\"")
target_compile_definitions(coll_objects PRIVATE COLL_HAVE_CUDA=1 COLL_CUDA_ARCHS_STR="${_archs_str}")
target_include_directories(coll_objects PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
# tests that include src/device headers see the same configuration
target_compile_definitions(coll_internal INTERFACE COLL_HAVE_CUDA=1)
target_include_directories(coll_internal INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
# the toolkit's stub driver: tests load it to see the driver's failures
find_file(COLL_CUDA_STUB_LIB libcuda.so PATHS ${CUDAToolkit_LIBRARY_DIR}/stubs NO_DEFAULT_PATH)
message(STATUS "coll: CUDA ${CUDAToolkit_VERSION} support on, kernels for ${_archs_str}")

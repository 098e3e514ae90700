include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)

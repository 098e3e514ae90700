# cmake/python_shim.cmake - `cmake --install` installs the PyTorch shim
# (python/torch_coll) into a directory on the Python path, so that
# `import torch_coll` works without the source tree on PYTHONPATH.
#
#   COLL_INSTALL_PYTHON      ON: install the shim (default ON)
#   COLL_PYTHON              the interpreter whose path is used to choose the
#                            directory (default /usr/bin/python3 when it
#                            exists: Debian's torch lives there; else python3)
#   COLL_PYTHON_INSTALL_DIR  where the package goes, relative to the install
#                            prefix or absolute. Default: the entry of that
#                            interpreter's sys.path under CMAKE_INSTALL_PREFIX
#                            (Debian: /usr/local -> lib/python3.X/dist-packages,
#                            /usr -> lib/python3/dist-packages), else
#                            lib/python3.X/site-packages (add it to PYTHONPATH).
#
# Next to the package, torch_coll/libcoll.so links to the installed
# libcoll.so.0 by a relative path, which the shim loads first: the package
# finds its library under any prefix and DESTDIR, without LD_LIBRARY_PATH.
option(COLL_INSTALL_PYTHON "cmake --install also installs the PyTorch shim (python/torch_coll)" ON)
if(NOT COLL_INSTALL_PYTHON)
  return()
endif()

if(NOT COLL_PYTHON)
  if(EXISTS /usr/bin/python3)
    set(_coll_py /usr/bin/python3)
  else()
    find_program(_coll_py NAMES python3)
  endif()
  set(COLL_PYTHON "${_coll_py}" CACHE FILEPATH "Python whose path chooses COLL_PYTHON_INSTALL_DIR")
endif()

if(NOT COLL_PYTHON_INSTALL_DIR)
  set(_coll_pydir "")
  if(COLL_PYTHON)
    execute_process(
      COMMAND "${COLL_PYTHON}" -c
        "import os, sys
p = os.path.realpath(sys.argv[1])
for d in sys.path:
    d = os.path.realpath(d) if d else ''
    if d.endswith('-packages') and d.startswith(p.rstrip('/') + '/'):
        print(os.path.relpath(d, p))
        break
else:
    print('lib/python%d.%d/site-packages' % sys.version_info[:2])"
        "${CMAKE_INSTALL_PREFIX}"
      OUTPUT_VARIABLE _coll_pydir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _coll_pyrc ERROR_QUIET)
    if(NOT _coll_pyrc EQUAL 0)
      set(_coll_pydir "")
    endif()
  endif()
  if(NOT _coll_pydir)
    set(_coll_pydir "${CMAKE_INSTALL_LIBDIR}/python3/dist-packages")
  endif()
  set(COLL_PYTHON_INSTALL_DIR "${_coll_pydir}" CACHE STRING
      "where cmake --install puts torch_coll (relative to the install prefix, or absolute)")
endif()
if(IS_ABSOLUTE "${COLL_PYTHON_INSTALL_DIR}")
  set(_coll_pyshow "${COLL_PYTHON_INSTALL_DIR}")
else()
  set(_coll_pyshow "${CMAKE_INSTALL_PREFIX}/${COLL_PYTHON_INSTALL_DIR}")
endif()
message(STATUS "coll: cmake --install puts the PyTorch shim in ${_coll_pyshow}/torch_coll"
               " (COLL_PYTHON_INSTALL_DIR; COLL_INSTALL_PYTHON=OFF: not at all)")

install(DIRECTORY python/torch_coll DESTINATION "${COLL_PYTHON_INSTALL_DIR}" COMPONENT python
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
# the relative link is computed at install time, from the prefix in force
# then (cmake --install --prefix), so that it holds under DESTDIR too
install(CODE "
  set(_py \"${COLL_PYTHON_INSTALL_DIR}\")
  if(NOT IS_ABSOLUTE \"\${_py}\")
    set(_py \"\${CMAKE_INSTALL_PREFIX}/\${_py}\")
  endif()
  set(_lib \"${CMAKE_INSTALL_LIBDIR}\")
  if(NOT IS_ABSOLUTE \"\${_lib}\")
    set(_lib \"\${CMAKE_INSTALL_PREFIX}/\${_lib}\")
  endif()
  file(RELATIVE_PATH _rel \"\${_py}/torch_coll\" \"\${_lib}/libcoll.so.${PROJECT_VERSION_MAJOR}\")
  set(_link \"\$ENV{DESTDIR}\${_py}/torch_coll/libcoll.so\")
  message(STATUS \"Installing: \${_link} -> \${_rel}\")
  file(REMOVE \"\${_link}\")
  file(CREATE_LINK \"\${_rel}\" \"\${_link}\" SYMBOLIC)
" COMPONENT python)

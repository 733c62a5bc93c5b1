# install_python.cmake - run by `cmake --install` (install(SCRIPT) in the
# top CMakeLists.txt, which sets the RMA_PY_* variables): the Python
# package python/rma into the prefix's site directory, with _install.py
# naming librma relative to the package, so that it finds the library of
# its own prefix wherever that is moved (--prefix, DESTDIR, a copy).
#
# The directory, after Debian's convention, by the prefix installed to:
# /usr in lib/python3/dist-packages; /usr/local in
# lib/python3.X/dist-packages, which Debian's python3 searches; any other
# prefix in lib/python3.X/site-packages ($HOME/.local: the user site).
# RMA_PYTHONDIR (relative: to the prefix) overrides it.
set(_dir "${RMA_PY_DIR}")
if(NOT _dir)
  if(CMAKE_INSTALL_PREFIX MATCHES "^/usr/?$")
    set(_dir lib/python3/dist-packages)
  elseif(CMAKE_INSTALL_PREFIX MATCHES "^/usr/local/?$")
    set(_dir lib/python${RMA_PY_VERSION}/dist-packages)
  else()
    set(_dir lib/python${RMA_PY_VERSION}/site-packages)
  endif()
endif()
if(NOT IS_ABSOLUTE "${_dir}")
  set(_dir "${CMAKE_INSTALL_PREFIX}/${_dir}")
endif()
set(_lib "${RMA_PY_LIBDIR}")
if(NOT IS_ABSOLUTE "${_lib}")
  set(_lib "${CMAKE_INSTALL_PREFIX}/${_lib}")
endif()
file(RELATIVE_PATH _up "${_dir}/rma" "${_lib}")
if(NOT _up)
  set(_up .)
endif()

file(GLOB _files "${RMA_PY_SRC}/*.py" "${RMA_PY_SRC}/py.typed")
list(FILTER _files EXCLUDE REGEX "/_install\\.py$")
file(WRITE "${RMA_PY_BUILD}/_install.py"
  "\"\"\"Written by the install: where librma lies, relative to this package.\"\"\"\n"
  "import os\n\n"
  "LIBRARY = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),\n"
  "                                        \"${_up}\", \"librma.so.0\"))\n")
file(INSTALL ${_files} "${RMA_PY_BUILD}/_install.py" DESTINATION "${_dir}/rma"
  FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
message(STATUS "Python package: ${_dir}/rma")

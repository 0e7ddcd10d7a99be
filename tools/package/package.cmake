# Installation and packaging (included by the top CMakeLists.txt after every target exists).
#   cmake --install build --prefix /opt/sonopipe       programs, stage SDK, CMake/pkg-config files, Python
#   (cd build && cpack -G DEB)                          sonopipe_<version>_amd64.deb
# Layout under the prefix: bin/ (sonopiped, sonopipe-*), lib/<multiarch>/libsonopipe-stage-sdk.so,
# lib/<multiarch>/libsonopipe-client.so, include/sonopipe/sdk/*.h (the stage SDK),
# include/sonopipe/sonopipe_client.h, lib/<multiarch>/cmake/sonopipe/ (find_package),
# lib/<multiarch>/pkgconfig/sonopipe.pc and sonopipe-client.pc, lib/python3/dist-packages/sonopipe (Debian's python3 path),
# share/sonopipe/config/*.yaml, share/sonopipe/matlab/ (*.m and sonopipe_mex.c), share/doc/sonopipe/.
include(CMakePackageConfigHelpers)

set(SONOPIPE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/sonopipe)
set(SONOPIPE_INSTALL_PYTHONDIR lib/python3/dist-packages)
set(package_dir ${PROJECT_SOURCE_DIR}/tools/package)

# CMake package: find_package(sonopipe) gives sonopipe::stage_sdk (and the C client library when built).
install(EXPORT sonopipe-targets NAMESPACE sonopipe:: DESTINATION ${SONOPIPE_INSTALL_CMAKEDIR}
        FILE sonopipe-targets.cmake COMPONENT sdk)
configure_package_config_file(${package_dir}/sonopipeConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/sonopipeConfig.cmake
                              INSTALL_DESTINATION ${SONOPIPE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sonopipeConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sonopipeConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/sonopipeConfigVersion.cmake
        DESTINATION ${SONOPIPE_INSTALL_CMAKEDIR} COMPONENT sdk)

# pkg-config: the stage SDK (compile flags and library) for builds without CMake. The prefix is
# found relative to the .pc file, so a moved prefix (or an unpacked .deb) still works.
file(RELATIVE_PATH SONOPIPE_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${package_dir}/sonopipe.pc.in ${CMAKE_CURRENT_BINARY_DIR}/sonopipe.pc @ONLY)
# And the C client library (client/): `pkg-config --cflags --libs sonopipe-client`.
configure_file(${package_dir}/sonopipe-client.pc.in ${CMAKE_CURRENT_BINARY_DIR}/sonopipe-client.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sonopipe.pc ${CMAKE_CURRENT_BINARY_DIR}/sonopipe-client.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT sdk)

# The Python package with its generated protobuf modules inside it (sonopipe/v1) and the page of
# sonopipe-web (sonopipe/web/static), sonopipe-view and sonopipe-web.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/python/sonopipe DESTINATION ${SONOPIPE_INSTALL_PYTHONDIR}
        COMPONENT runtime PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE)
install(DIRECTORY ${SONOPIPE_PROTO_PY_DIR}/sonopipe/v1 DESTINATION ${SONOPIPE_INSTALL_PYTHONDIR}/sonopipe
        COMPONENT runtime FILES_MATCHING PATTERN "*_pb2.py")
# The version file sonopipe._version reads (the same file CMake's project version comes from).
install(FILES ${PROJECT_SOURCE_DIR}/VERSION DESTINATION ${SONOPIPE_INSTALL_PYTHONDIR}/sonopipe COMPONENT runtime)
foreach(launcher IN ITEMS sonopipe-view sonopipe-web sonopipe-cohort)
  configure_file(${package_dir}/${launcher}.in ${CMAKE_CURRENT_BINARY_DIR}/installed/${launcher} @ONLY)
  install(PROGRAMS ${CMAKE_CURRENT_BINARY_DIR}/installed/${launcher} DESTINATION ${CMAKE_INSTALL_BINDIR}
          COMPONENT runtime)
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/config/ DESTINATION ${CMAKE_INSTALL_DATADIR}/sonopipe/config
        COMPONENT runtime FILES_MATCHING PATTERN "*.yaml")
# The MATLAB/Octave classes and the MEX gateway source (tools/clients/matlab; sonopipe_build_mex.m compiles it).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/clients/matlab/ DESTINATION ${CMAKE_INSTALL_DATADIR}/sonopipe/matlab
        COMPONENT sdk FILES_MATCHING PATTERN "*.m" PATTERN "sonopipe_mex.c")
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/adding-a-stage.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

# Debian package. Library dependencies are computed by dpkg-shlibdeps from the installed binaries;
# CUDA's libraries (NVIDIA's toolkit, not a Debian package) are treated as private to the host.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sonopipe)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "sonopipe developers <sonopipe@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "real-time GPU pipeline daemon for ultrasound and perfusion research")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # sonopipe_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3, python3-zmq, python3-protobuf, python3-numpy, python3-h5py, python3-matplotlib, python3-aiohttp")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-distributed")  # sonopipe-cohort only
if(SONOPIPE_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
include(CPack)

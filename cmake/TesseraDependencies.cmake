# Every dependency comes from Debian's packages (deploy/install-deps.sh installs them).

find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(yaml-cpp REQUIRED)

if(TESSERA_TORCH_DIR)
  list(PREPEND CMAKE_PREFIX_PATH ${TESSERA_TORCH_DIR})
endif()

if(TESSERA_ENGINE_ONLY)
  # What the engine, its tests and the canary need; gRPC (the canary's result protos) if found.
  find_package(gRPC CONFIG QUIET)
  find_package(PkgConfig REQUIRED)
  find_package(spdlog REQUIRED)
  find_package(nlohmann_json REQUIRED)
  find_package(CLI11 REQUIRED)
  find_package(Catch2 REQUIRED)
  find_package(Torch REQUIRED)
  message(STATUS "LibTorch ${Torch_VERSION} from ${Torch_DIR}")
  include(Catch)
  include(TesseraTesting)
elseif(NOT TESSERA_FUZZ_ONLY)
  find_package(gRPC CONFIG REQUIRED)
  find_package(OpenSSL REQUIRED)
  # libcurl (Debian's libcurl4-openssl-dev) and zlib: the image cache's registry client.
  find_package(CURL REQUIRED)
  find_package(ZLIB REQUIRED)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(PQXX REQUIRED IMPORTED_TARGET libpqxx)
  # RE2 (Debian's libre2-dev): `mcli logs --grep`, matched by the log service.
  pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
  # jemalloc (Debian's libjemalloc-dev): the control plane's malloc. glibc's spent about a third
  # of tessera-server's CPU at 5,000 nodes (bench/control_plane: 11% less CPU with jemalloc).
  pkg_check_modules(JEMALLOC REQUIRED IMPORTED_TARGET jemalloc)
  # libseccomp (Debian's libseccomp-dev): the filter every rank's sandbox runs under.
  pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
  find_package(Boost REQUIRED COMPONENTS system)
  find_package(spdlog REQUIRED)
  find_package(nlohmann_json REQUIRED)
  find_package(CLI11 REQUIRED)
  find_package(Catch2 REQUIRED)
  # LibTorch (Debian's libtorch-dev, CPU) for the training engine and the canary.
  find_package(Torch REQUIRED)
  include(Catch)
  include(TesseraTesting)
endif()

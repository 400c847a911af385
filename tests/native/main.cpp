// The Catch2 main for the native and the wasm test executables.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

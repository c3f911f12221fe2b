// libtailmark-client's unit tests: no DPDK, no EAL, so Catch2's own main.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

// cpp-httplib as Debian/Ubuntu ship it (0.11, libcpp-httplib-dev): a compiled library built with
// TLS, zlib and brotli support. Those macros change class layouts (httplib::Request gains an SSL
// pointer), so every includer must define them exactly as the library was built (its
// cpp-httplib.pc Cflags), or the ABI silently mismatches. Link with -lcpp-httplib.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>

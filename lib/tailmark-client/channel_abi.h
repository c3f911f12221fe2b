// The channel ABI's old, private name: it is now the client library's public
// header <tailmark/channel_abi.h>. Kept only so that code written against
// the old name (tests/client) builds unchanged; new code includes
// "tailmark/channel_abi.h".
#pragma once

#include "tailmark/channel_abi.h"

// Log types, one per component: --log-level=tailmark.rx:debug and so on.
// Data-path lines use TM_LOG_DP, which compiles out below RTE_LOG_DP_LEVEL.
#pragma once

#include <rte_log.h>

extern int tailmark_logtype_lib;
extern int tailmark_logtype_rx;
extern int tailmark_logtype_tx;
extern int tailmark_logtype_port;
extern int tailmark_logtype_app;

#define TM_LOG(level, type, fmt, ...) \
    rte_log(RTE_LOG_##level, tailmark_logtype_##type, "tailmark." #type ": " fmt "\n", ##__VA_ARGS__)
#define TM_LOG_DP(level, type, fmt, ...) \
    RTE_LOG_DP(level, USER1, "tailmark." #type ": " fmt "\n", ##__VA_ARGS__)

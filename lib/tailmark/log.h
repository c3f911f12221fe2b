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
// Like RTE_LOG_DP, on the component's own type: the condition is a constant,
// so below RTE_LOG_DP_LEVEL the line is compiled out of the fast path.
#define TM_LOG_DP(level, type, fmt, ...)                                                 \
    do {                                                                                 \
        if (RTE_LOG_##level <= RTE_LOG_DP_LEVEL)                                         \
            rte_log(RTE_LOG_##level, tailmark_logtype_##type, "tailmark." #type ": " fmt "\n", \
                    ##__VA_ARGS__);                                                      \
    } while (0)

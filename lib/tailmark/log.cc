#include "tailmark/log.h"

// DPDK 22.11's RTE_LOG_REGISTER stringifies its name argument (RTE_STR), so
// the name is written bare: a quoted "tailmark.rx" would register a type whose
// name contains the quotes, and --log-level=tailmark.rx:debug would miss it.
RTE_LOG_REGISTER(tailmark_logtype_lib, tailmark.lib, INFO);
RTE_LOG_REGISTER(tailmark_logtype_rx, tailmark.rx, INFO);
RTE_LOG_REGISTER(tailmark_logtype_tx, tailmark.tx, INFO);
RTE_LOG_REGISTER(tailmark_logtype_port, tailmark.port, INFO);
RTE_LOG_REGISTER(tailmark_logtype_app, tailmark.app, INFO);

#include "tailmark/log.h"

RTE_LOG_REGISTER(tailmark_logtype_lib, "tailmark.lib", INFO);
RTE_LOG_REGISTER(tailmark_logtype_rx, "tailmark.rx", INFO);
RTE_LOG_REGISTER(tailmark_logtype_tx, "tailmark.tx", INFO);
RTE_LOG_REGISTER(tailmark_logtype_port, "tailmark.port", INFO);
RTE_LOG_REGISTER(tailmark_logtype_app, "tailmark.app", INFO);

#ifndef SUBLEDGER_CLIBPQ_SHIM_H
#define SUBLEDGER_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif

/* INFORMATION_SCHEMA.TABLESOCKET_CONNECTIONS: the plugin's init (it fills in the server's schema
   table description). The rows come from a provider the plugin glue gives, so this file knows
   nothing of the network layer. */
#ifndef TABLESOCKET_STORE_INFO_SCHEMA_H
#define TABLESOCKET_STORE_INFO_SCHEMA_H

#include <vector>

#include "common/conn_info.h"

namespace tablesocket {

using Connections_provider = std::vector<Connection_info> (*)();

/* p: the server's ST_SCHEMA_TABLE for the plugin. Returns 0. */
int info_schema_connections_init(void *p, Connections_provider provider);

}  // namespace tablesocket
#endif

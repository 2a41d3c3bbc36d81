/* The one place tablesocket includes MariaDB server-internal headers (store/ only). */
#ifndef TABLESOCKET_STORE_SERVER_INCL_H
#define TABLESOCKET_STORE_SERVER_INCL_H

#ifndef MYSQL_SERVER
#define MYSQL_SERVER 1
#endif
#include <my_global.h>
#include <mysql_version.h>
#include <my_pthread.h>
#include <sql_priv.h>
#include "sql_class.h"
#include "unireg.h"
#include "lock.h"
#include "key.h"
#include "transaction.h"
#include "sql_base.h"
#include "mdl.h"
#include "table_cache.h"
#include "log.h"
#include <mysql/plugin.h>

#undef min
#undef max

#endif

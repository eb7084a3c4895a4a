#include <sqlite3.h>

/* sqlite3_config takes its value through C varargs, which Swift cannot
   call: one setting, spelled out. */
static inline int outpost_sqlite3_config_memstatus(int on) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on);
}

#include "fault_vfs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* What one path holds while writes are volatile: the file's current bytes
   in memory (every connection to the path shares them), and which blocks of
   them differ from the real file, which holds exactly what was synced. */
#define BLOCK 4096
/* The most one call to the wrapped VFS reads or writes. */
#define CHUNK 65536
typedef struct VNode {
    char *path;
    int refs;
    int detached;          /* power was lost: no new connection finds it */
    unsigned char *data;   /* the current bytes */
    sqlite3_int64 size;
    sqlite3_int64 capacity;
    unsigned char *dirty;  /* one flag a BLOCK: written since the last sync */
    sqlite3_int64 blocks;
    int truncated;         /* the size changed since the last sync */
    int reset_shm;         /* opened after a power loss: the WAL index is rebuilt */
    struct VNode *next;
} VNode;

/* One schedule per registered name. */
typedef struct FaultState {
    pthread_mutex_t lock;
    int kinds;
    long after;
    int sticky;
    int armed;
    long seen;
    long injected;
    /* Power-loss model: writes stay in memory until synced. */
    int volatile_writes;
    int powered_off;       /* between a power loss and power_on: nothing works */
    long generation;       /* bumped by every power loss: older handles are dead */
    long power_losses;
    VNode *nodes;
} FaultState;

/* A file of the wrapped VFS, followed in memory by the real file. */
typedef struct FaultFile {
    sqlite3_file base;
    FaultState *state;
    sqlite3_file *real;
    VNode *node;           /* set when this file's writes are volatile */
    long generation;
} FaultFile;

static sqlite3_vfs *real_vfs(sqlite3_vfs *vfs) { return (sqlite3_vfs *)((void **)vfs->pAppData)[0]; }
static FaultState *vfs_state(sqlite3_vfs *vfs) { return (FaultState *)((void **)vfs->pAppData)[1]; }

/* Whether this operation of `kind` fails now. */
static int should_fail(FaultState *state, int kind) {
    int fail = 0;
    pthread_mutex_lock(&state->lock);
    if (state->armed && (state->kinds & kind)) {
        long index = state->seen++;
        if (index == state->after || (state->sticky && index > state->after)) {
            fail = 1;
            state->injected++;
            if (!state->sticky) state->armed = 0;
        }
    }
    pthread_mutex_unlock(&state->lock);
    return fail;
}

#define REAL(file) (((FaultFile *)(file))->real)
#define STATE(file) (((FaultFile *)(file))->state)
#define NODE(file) (((FaultFile *)(file))->node)

/* Called with the state's lock held: every volatile file loses what it did
   not sync, every open handle dies, and nothing works until power_on. */
static void lose_power_locked(FaultState *state) {
    state->power_losses++;
    state->generation++;
    state->powered_off = 1;
    for (VNode *node = state->nodes; node; node = node->next) node->detached = 1;
    state->nodes = NULL;
}

/* Whether the handle belongs to a world that lost its power. */
static int is_dead(sqlite3_file *file) {
    FaultState *state = STATE(file);
    pthread_mutex_lock(&state->lock);
    int dead = state->powered_off || ((FaultFile *)file)->generation != state->generation;
    pthread_mutex_unlock(&state->lock);
    return dead;
}

/* Whether the armed power loss comes at this write or sync (and it then happens). */
static int power_fails(FaultState *state) {
    int fail = 0;
    pthread_mutex_lock(&state->lock);
    if (state->armed && (state->kinds & OUTPOST_FAULT_POWER)) {
        long index = state->seen++;
        if (index == state->after) {
            fail = 1;
            state->injected++;
            state->armed = 0;
            lose_power_locked(state);
        }
    }
    pthread_mutex_unlock(&state->lock);
    return fail;
}

static void node_free(VNode *node) {
    free(node->path);
    free(node->data);
    free(node->dirty);
    free(node);
}

/* Grows the node to hold `size` bytes (zero-filled); 0 when out of memory. */
static int node_reserve(VNode *node, sqlite3_int64 size) {
    if (size > node->capacity) {
        sqlite3_int64 capacity = node->capacity ? node->capacity : BLOCK;
        while (capacity < size) capacity *= 2;
        unsigned char *data = realloc(node->data, (size_t)capacity);
        if (!data) return 0;
        memset(data + node->capacity, 0, (size_t)(capacity - node->capacity));
        node->data = data;
        node->capacity = capacity;
    }
    sqlite3_int64 blocks = (size + BLOCK - 1) / BLOCK;
    if (blocks > node->blocks) {
        unsigned char *dirty = realloc(node->dirty, (size_t)blocks);
        if (!dirty) return 0;
        memset(dirty + node->blocks, 0, (size_t)(blocks - node->blocks));
        node->dirty = dirty;
        node->blocks = blocks;
    }
    return 1;
}

static int f_close(sqlite3_file *file) {
    VNode *node = NODE(file);
    if (node) {
        FaultState *state = STATE(file);
        pthread_mutex_lock(&state->lock);
        if (--node->refs == 0) {
            if (!node->detached) {
                VNode **link = &state->nodes;
                while (*link && *link != node) link = &(*link)->next;
                if (*link) *link = node->next;
            }
            node_free(node);
        }
        pthread_mutex_unlock(&state->lock);
    }
    int rc = REAL(file)->pMethods ? REAL(file)->pMethods->xClose(REAL(file)) : SQLITE_OK;
    return rc;
}
static int f_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    if (should_fail(STATE(file), OUTPOST_FAULT_READ)) return SQLITE_IOERR_READ;
    VNode *node = NODE(file);
    if (!node) return REAL(file)->pMethods->xRead(REAL(file), buffer, amount, offset);
    if (is_dead(file)) return SQLITE_IOERR_READ;
    FaultState *state = STATE(file);
    pthread_mutex_lock(&state->lock);
    sqlite3_int64 available = node->size > offset ? node->size - offset : 0;
    int count = available < amount ? (int)available : amount;
    if (count > 0) memcpy(buffer, node->data + offset, (size_t)count);
    pthread_mutex_unlock(&state->lock);
    if (count < amount) {
        /* SQLite's contract: a short read zero-fills the rest. */
        memset((unsigned char *)buffer + count, 0, (size_t)(amount - count));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}
static int f_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    if (should_fail(STATE(file), OUTPOST_FAULT_WRITE)) return SQLITE_FULL;
    VNode *node = NODE(file);
    if (!node) return REAL(file)->pMethods->xWrite(REAL(file), buffer, amount, offset);
    if (is_dead(file) || power_fails(STATE(file))) return SQLITE_IOERR_WRITE;
    FaultState *state = STATE(file);
    pthread_mutex_lock(&state->lock);
    int rc = SQLITE_OK;
    if (!node_reserve(node, offset + amount)) {
        rc = SQLITE_NOMEM;
    } else {
        memcpy(node->data + offset, buffer, (size_t)amount);
        if (offset + amount > node->size) node->size = offset + amount;
        for (sqlite3_int64 block = offset / BLOCK; block <= (offset + amount - 1) / BLOCK; block++) node->dirty[block] = 1;
    }
    pthread_mutex_unlock(&state->lock);
    return rc;
}
static int f_truncate(sqlite3_file *file, sqlite3_int64 size) {
    if (should_fail(STATE(file), OUTPOST_FAULT_WRITE)) return SQLITE_FULL;
    VNode *node = NODE(file);
    if (!node) return REAL(file)->pMethods->xTruncate(REAL(file), size);
    if (is_dead(file)) return SQLITE_IOERR_TRUNCATE;
    FaultState *state = STATE(file);
    pthread_mutex_lock(&state->lock);
    int rc = SQLITE_OK;
    if (size > node->size) {
        if (!node_reserve(node, size)) rc = SQLITE_NOMEM;
        else node->size = size;
    } else {
        memset(node->data + size, 0, (size_t)(node->size - size));
        node->size = size;
    }
    node->truncated = 1;
    pthread_mutex_unlock(&state->lock);
    return rc;
}
/* The node's bytes that changed since the last sync reach the real file,
   which is then synced: from now on a power loss keeps them. */
static int f_sync(sqlite3_file *file, int flags) {
    if (should_fail(STATE(file), OUTPOST_FAULT_SYNC)) return SQLITE_IOERR_FSYNC;
    VNode *node = NODE(file);
    if (!node) return REAL(file)->pMethods->xSync(REAL(file), flags);
    if (is_dead(file) || power_fails(STATE(file))) return SQLITE_IOERR_FSYNC;
    FaultState *state = STATE(file);
    sqlite3_file *real = REAL(file);
    int rc = SQLITE_OK;
    pthread_mutex_lock(&state->lock);
    sqlite3_int64 blocks = (node->size + BLOCK - 1) / BLOCK;
    for (sqlite3_int64 block = 0; block < blocks && rc == SQLITE_OK; block++) {
        if (!node->dirty[block]) continue;
        sqlite3_int64 end = block;
        while (end + 1 < blocks && node->dirty[end + 1]) end++;
        sqlite3_int64 from = block * BLOCK;
        sqlite3_int64 to = (end + 1) * BLOCK < node->size ? (end + 1) * BLOCK : node->size;
        /* SQLite's own VFS writes at most 128 KiB a call (it never needs more). */
        for (sqlite3_int64 at = from; at < to && rc == SQLITE_OK; at += CHUNK) {
            int count = (int)(to - at < CHUNK ? to - at : CHUNK);
            rc = real->pMethods->xWrite(real, node->data + at, count, at);
        }
        if (rc == SQLITE_OK) memset(node->dirty + block, 0, (size_t)(end - block + 1));
        block = end;
    }
    if (rc == SQLITE_OK && node->truncated) {
        rc = real->pMethods->xTruncate(real, node->size);
        if (rc == SQLITE_OK) node->truncated = 0;
    }
    pthread_mutex_unlock(&state->lock);
    if (rc != SQLITE_OK) return rc;
    return real->pMethods->xSync(real, flags);
}
static int f_file_size(sqlite3_file *file, sqlite3_int64 *size) {
    VNode *node = NODE(file);
    if (!node) return REAL(file)->pMethods->xFileSize(REAL(file), size);
    if (is_dead(file)) return SQLITE_IOERR_FSTAT;
    pthread_mutex_lock(&STATE(file)->lock);
    *size = node->size;
    pthread_mutex_unlock(&STATE(file)->lock);
    return SQLITE_OK;
}
static int f_lock(sqlite3_file *file, int level) { return REAL(file)->pMethods->xLock(REAL(file), level); }
static int f_unlock(sqlite3_file *file, int level) { return REAL(file)->pMethods->xUnlock(REAL(file), level); }
static int f_check_reserved(sqlite3_file *file, int *out) { return REAL(file)->pMethods->xCheckReservedLock(REAL(file), out); }
static int f_file_control(sqlite3_file *file, int op, void *arg) { return REAL(file)->pMethods->xFileControl(REAL(file), op, arg); }
static int f_sector_size(sqlite3_file *file) { return REAL(file)->pMethods->xSectorSize(REAL(file)); }
static int f_device_characteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}
/* After a power loss a rebooted machine rebuilds the WAL index from the WAL
   the disk kept. In process, a handle of the dead world may still hold the
   shared-memory index open, which would keep SQLite from rebuilding it and
   leave it describing frames the loss took: the first connection of the new
   world clears the index's headers, so SQLite rebuilds it. */
static int f_shm_map(sqlite3_file *file, int page, int size, int extend, void volatile **out) {
    int rc = REAL(file)->pMethods->xShmMap(REAL(file), page, size, extend, out);
    VNode *node = NODE(file);
    if (rc == SQLITE_OK && node && page == 0 && *out) {
        pthread_mutex_lock(&STATE(file)->lock);
        if (node->reset_shm) {
            memset((void *)*out, 0, 136 < size ? 136 : (size_t)size);
            node->reset_shm = 0;
        }
        pthread_mutex_unlock(&STATE(file)->lock);
    }
    return rc;
}
static int f_shm_lock(sqlite3_file *file, int offset, int n, int flags) {
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, n, flags);
}
static void f_shm_barrier(sqlite3_file *file) { REAL(file)->pMethods->xShmBarrier(REAL(file)); }
static int f_shm_unmap(sqlite3_file *file, int delete_flag) { return REAL(file)->pMethods->xShmUnmap(REAL(file), delete_flag); }
/* A volatile file is never memory-mapped: a mapping would read the real
   file, past the bytes held in memory. */
static int f_fetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
    if (NODE(file)) {
        *out = NULL;
        return SQLITE_OK;
    }
    return REAL(file)->pMethods->xFetch(REAL(file), offset, amount, out);
}
static int f_unfetch(sqlite3_file *file, sqlite3_int64 offset, void *page) {
    if (NODE(file)) return SQLITE_OK;
    return REAL(file)->pMethods->xUnfetch(REAL(file), offset, page);
}

static const sqlite3_io_methods fault_methods = {
    3, f_close, f_read, f_write, f_truncate, f_sync, f_file_size, f_lock, f_unlock, f_check_reserved, f_file_control,
    f_sector_size, f_device_characteristics, f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch, f_unfetch,
};

/* The volatile node of `name`: the one other connections share, or a new
   one holding the real file's bytes. Called with the state's lock held. */
static VNode *node_open(FaultState *state, const char *name, sqlite3_file *real) {
    for (VNode *node = state->nodes; node; node = node->next) {
        if (strcmp(node->path, name) == 0) {
            node->refs++;
            return node;
        }
    }
    VNode *node = calloc(1, sizeof(VNode));
    if (!node) return NULL;
    node->path = strdup(name);
    sqlite3_int64 size = 0;
    if (!node->path || real->pMethods->xFileSize(real, &size) != SQLITE_OK || !node_reserve(node, size)) {
        node_free(node);
        return NULL;
    }
    for (sqlite3_int64 at = 0; at < size; at += CHUNK) {
        int count = (int)(size - at < CHUNK ? size - at : CHUNK);
        if (real->pMethods->xRead(real, node->data + at, count, at) != SQLITE_OK) {
            node_free(node);
            return NULL;
        }
    }
    node->size = size;
    node->refs = 1;
    node->reset_shm = state->power_losses > 0;
    node->next = state->nodes;
    state->nodes = node;
    return node;
}

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
    FaultFile *wrapper = (FaultFile *)file;
    FaultState *state = vfs_state(vfs);
    wrapper->state = state;
    wrapper->real = (sqlite3_file *)&wrapper[1];
    wrapper->node = NULL;
    pthread_mutex_lock(&state->lock);
    int off = state->powered_off;
    wrapper->generation = state->generation;
    pthread_mutex_unlock(&state->lock);
    wrapper->base.pMethods = NULL;
    if (off) return SQLITE_CANTOPEN;
    int rc = real_vfs(vfs)->xOpen(real_vfs(vfs), name, wrapper->real, flags, out_flags);
    if (rc != SQLITE_OK || !wrapper->real->pMethods) return rc;
    /* The database, its WAL and journals are volatile; temporary files are not kept anyway. */
    if (name && (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL))) {
        pthread_mutex_lock(&state->lock);
        if (state->volatile_writes) {
            wrapper->node = node_open(state, name, wrapper->real);
            if (!wrapper->node) rc = SQLITE_NOMEM;
        }
        pthread_mutex_unlock(&state->lock);
        if (rc != SQLITE_OK) {
            wrapper->real->pMethods->xClose(wrapper->real);
            return rc;
        }
    }
    /* SQLite calls xClose only when pMethods is set: set it only on success. */
    wrapper->base.pMethods = &fault_methods;
    return rc;
}
static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
    FaultState *state = vfs_state(vfs);
    pthread_mutex_lock(&state->lock);
    int off = state->powered_off;
    if (!off) {
        /* A file deleted is gone from memory too (a connection reopening it starts empty). */
        for (VNode *node = state->nodes; node; node = node->next) {
            if (strcmp(node->path, name) == 0) {
                node->size = 0;
                node->truncated = 0;
                if (node->dirty) memset(node->dirty, 0, (size_t)node->blocks);
            }
        }
    }
    pthread_mutex_unlock(&state->lock);
    /* A process without power deletes nothing. */
    if (off) return SQLITE_IOERR_DELETE;
    return real_vfs(vfs)->xDelete(real_vfs(vfs), name, sync_dir);
}
static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    return real_vfs(vfs)->xAccess(real_vfs(vfs), name, flags, out);
}
static int v_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    return real_vfs(vfs)->xFullPathname(real_vfs(vfs), name, size, out);
}
static void *v_dl_open(sqlite3_vfs *vfs, const char *name) { return real_vfs(vfs)->xDlOpen(real_vfs(vfs), name); }
static void v_dl_error(sqlite3_vfs *vfs, int size, char *out) { real_vfs(vfs)->xDlError(real_vfs(vfs), size, out); }
static void (*v_dl_sym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    return real_vfs(vfs)->xDlSym(real_vfs(vfs), handle, symbol);
}
static void v_dl_close(sqlite3_vfs *vfs, void *handle) { real_vfs(vfs)->xDlClose(real_vfs(vfs), handle); }
static int v_randomness(sqlite3_vfs *vfs, int size, char *out) { return real_vfs(vfs)->xRandomness(real_vfs(vfs), size, out); }
static int v_sleep(sqlite3_vfs *vfs, int microseconds) { return real_vfs(vfs)->xSleep(real_vfs(vfs), microseconds); }
static int v_current_time(sqlite3_vfs *vfs, double *out) { return real_vfs(vfs)->xCurrentTime(real_vfs(vfs), out); }
static int v_get_last_error(sqlite3_vfs *vfs, int size, char *out) {
    return real_vfs(vfs)->xGetLastError ? real_vfs(vfs)->xGetLastError(real_vfs(vfs), size, out) : 0;
}
static int v_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    return real_vfs(vfs)->xCurrentTimeInt64(real_vfs(vfs), out);
}

static FaultState *find_state(const char *name) {
    sqlite3_vfs *vfs = sqlite3_vfs_find(name);
    if (!vfs || vfs->xOpen != v_open) return NULL;
    return vfs_state(vfs);
}

int outpost_fault_vfs_register(const char *name) {
    if (find_state(name)) return SQLITE_OK;
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (!base) return SQLITE_ERROR;
    sqlite3_vfs *vfs = calloc(1, sizeof(sqlite3_vfs));
    FaultState *state = calloc(1, sizeof(FaultState));
    void **app = calloc(2, sizeof(void *));
    char *copy = strdup(name);
    if (!vfs || !state || !app || !copy) return SQLITE_NOMEM;
    pthread_mutex_init(&state->lock, NULL);
    app[0] = base;
    app[1] = state;
    vfs->iVersion = 2;
    vfs->szOsFile = (int)sizeof(FaultFile) + base->szOsFile;
    vfs->mxPathname = base->mxPathname;
    vfs->zName = copy;
    vfs->pAppData = app;
    vfs->xOpen = v_open;
    vfs->xDelete = v_delete;
    vfs->xAccess = v_access;
    vfs->xFullPathname = v_full_pathname;
    vfs->xDlOpen = v_dl_open;
    vfs->xDlError = v_dl_error;
    vfs->xDlSym = v_dl_sym;
    vfs->xDlClose = v_dl_close;
    vfs->xRandomness = v_randomness;
    vfs->xSleep = v_sleep;
    vfs->xCurrentTime = v_current_time;
    vfs->xGetLastError = v_get_last_error;
    vfs->xCurrentTimeInt64 = v_current_time_int64;
    return sqlite3_vfs_register(vfs, 0);
}

void outpost_fault_vfs_arm(const char *name, int kinds, long after, int sticky) {
    FaultState *state = find_state(name);
    if (!state) return;
    pthread_mutex_lock(&state->lock);
    state->kinds = kinds;
    state->after = after;
    state->sticky = sticky;
    state->seen = 0;
    state->armed = 1;
    pthread_mutex_unlock(&state->lock);
}

/* Runs `statement` with `state` bound to `name`'s state, under its lock
   (nothing when no such VFS is registered). */
#define WITH_STATE(name, statement)                \
    do {                                           \
        FaultState *state = find_state(name);      \
        if (!state) break;                         \
        pthread_mutex_lock(&state->lock);          \
        statement;                                 \
        pthread_mutex_unlock(&state->lock);        \
    } while (0)

void outpost_fault_vfs_disarm(const char *name) { WITH_STATE(name, state->armed = 0); }

/* One of `name`'s counters, read under its lock (0 when no such VFS). */
enum { COUNTER_INJECTED, COUNTER_SEEN, COUNTER_POWER_LOSSES };
static long counter(const char *name, int which) {
    long count = 0;
    WITH_STATE(name, count = which == COUNTER_INJECTED ? state->injected
                           : which == COUNTER_SEEN   ? state->seen
                                                     : state->power_losses);
    return count;
}

long outpost_fault_vfs_injected(const char *name) { return counter(name, COUNTER_INJECTED); }

long outpost_fault_vfs_operations(const char *name) { return counter(name, COUNTER_SEEN); }

void outpost_fault_vfs_set_volatile(const char *name, int on) { WITH_STATE(name, state->volatile_writes = on); }

void outpost_fault_vfs_lose_power(const char *name) { WITH_STATE(name, lose_power_locked(state)); }

void outpost_fault_vfs_power_on(const char *name) { WITH_STATE(name, state->powered_off = 0); }

int outpost_fault_vfs_is_powered_off(const char *name) {
    int off = 0;
    WITH_STATE(name, off = state->powered_off);
    return off;
}

long outpost_fault_vfs_power_losses(const char *name) { return counter(name, COUNTER_POWER_LOSSES); }

const char *outpost_fault_vfs_base_name(void) {
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    return base ? base->zName : "unix";
}

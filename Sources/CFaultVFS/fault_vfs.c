#include "fault_vfs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* One schedule per registered name. */
typedef struct FaultState {
    pthread_mutex_t lock;
    int kinds;
    long after;
    int sticky;
    int armed;
    long seen;
    long injected;
} FaultState;

/* A file of the wrapped VFS, followed in memory by the real file. */
typedef struct FaultFile {
    sqlite3_file base;
    FaultState *state;
    sqlite3_file *real;
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

static int f_close(sqlite3_file *file) {
    int rc = REAL(file)->pMethods ? REAL(file)->pMethods->xClose(REAL(file)) : SQLITE_OK;
    return rc;
}
static int f_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    if (should_fail(STATE(file), OUTPOST_FAULT_READ)) return SQLITE_IOERR_READ;
    return REAL(file)->pMethods->xRead(REAL(file), buffer, amount, offset);
}
static int f_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    if (should_fail(STATE(file), OUTPOST_FAULT_WRITE)) return SQLITE_FULL;
    return REAL(file)->pMethods->xWrite(REAL(file), buffer, amount, offset);
}
static int f_truncate(sqlite3_file *file, sqlite3_int64 size) {
    if (should_fail(STATE(file), OUTPOST_FAULT_WRITE)) return SQLITE_FULL;
    return REAL(file)->pMethods->xTruncate(REAL(file), size);
}
static int f_sync(sqlite3_file *file, int flags) {
    if (should_fail(STATE(file), OUTPOST_FAULT_SYNC)) return SQLITE_IOERR_FSYNC;
    return REAL(file)->pMethods->xSync(REAL(file), flags);
}
static int f_file_size(sqlite3_file *file, sqlite3_int64 *size) { return REAL(file)->pMethods->xFileSize(REAL(file), size); }
static int f_lock(sqlite3_file *file, int level) { return REAL(file)->pMethods->xLock(REAL(file), level); }
static int f_unlock(sqlite3_file *file, int level) { return REAL(file)->pMethods->xUnlock(REAL(file), level); }
static int f_check_reserved(sqlite3_file *file, int *out) { return REAL(file)->pMethods->xCheckReservedLock(REAL(file), out); }
static int f_file_control(sqlite3_file *file, int op, void *arg) { return REAL(file)->pMethods->xFileControl(REAL(file), op, arg); }
static int f_sector_size(sqlite3_file *file) { return REAL(file)->pMethods->xSectorSize(REAL(file)); }
static int f_device_characteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}
static int f_shm_map(sqlite3_file *file, int page, int size, int extend, void volatile **out) {
    return REAL(file)->pMethods->xShmMap(REAL(file), page, size, extend, out);
}
static int f_shm_lock(sqlite3_file *file, int offset, int n, int flags) {
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, n, flags);
}
static void f_shm_barrier(sqlite3_file *file) { REAL(file)->pMethods->xShmBarrier(REAL(file)); }
static int f_shm_unmap(sqlite3_file *file, int delete_flag) { return REAL(file)->pMethods->xShmUnmap(REAL(file), delete_flag); }
static int f_fetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
    return REAL(file)->pMethods->xFetch(REAL(file), offset, amount, out);
}
static int f_unfetch(sqlite3_file *file, sqlite3_int64 offset, void *page) {
    return REAL(file)->pMethods->xUnfetch(REAL(file), offset, page);
}

static const sqlite3_io_methods fault_methods = {
    3, f_close, f_read, f_write, f_truncate, f_sync, f_file_size, f_lock, f_unlock, f_check_reserved, f_file_control,
    f_sector_size, f_device_characteristics, f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch, f_unfetch,
};

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
    FaultFile *wrapper = (FaultFile *)file;
    wrapper->state = vfs_state(vfs);
    wrapper->real = (sqlite3_file *)&wrapper[1];
    int rc = real_vfs(vfs)->xOpen(real_vfs(vfs), name, wrapper->real, flags, out_flags);
    /* SQLite calls xClose only when pMethods is set: set it only on success. */
    wrapper->base.pMethods = rc == SQLITE_OK && wrapper->real->pMethods ? &fault_methods : NULL;
    return rc;
}
static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) { return real_vfs(vfs)->xDelete(real_vfs(vfs), name, sync_dir); }
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

void outpost_fault_vfs_disarm(const char *name) {
    FaultState *state = find_state(name);
    if (!state) return;
    pthread_mutex_lock(&state->lock);
    state->armed = 0;
    pthread_mutex_unlock(&state->lock);
}

long outpost_fault_vfs_injected(const char *name) {
    FaultState *state = find_state(name);
    if (!state) return 0;
    pthread_mutex_lock(&state->lock);
    long count = state->injected;
    pthread_mutex_unlock(&state->lock);
    return count;
}

long outpost_fault_vfs_operations(const char *name) {
    FaultState *state = find_state(name);
    if (!state) return 0;
    pthread_mutex_lock(&state->lock);
    long count = state->seen;
    pthread_mutex_unlock(&state->lock);
    return count;
}

#ifndef OUTPOST_FAULT_VFS_H
#define OUTPOST_FAULT_VFS_H

/// A SQLite VFS that wraps the platform's own and fails chosen operations on
/// a schedule: the device's disk filling up, an I/O error, a read that
/// fails, a filesystem that stops taking writes. Each registered name has
/// its own schedule, so tests running in parallel never share faults.

/// Operations a schedule can fail.
enum {
    OUTPOST_FAULT_WRITE = 1,     /* xWrite and xTruncate: SQLITE_FULL (disk full) */
    OUTPOST_FAULT_SYNC = 2,      /* xSync: SQLITE_IOERR_FSYNC */
    OUTPOST_FAULT_READ = 4,      /* xRead: SQLITE_IOERR_READ */
};

/// Registers a VFS called `name` over the default one. Returns 0 on success.
int outpost_fault_vfs_register(const char *name);

/// Arms `name`: the (after+1)-th matching operation fails, and every one
/// after it too when `sticky` (a disk that stays full), or only that one.
void outpost_fault_vfs_arm(const char *name, int kinds, long after, int sticky);

/// Stops injecting faults on `name`.
void outpost_fault_vfs_disarm(const char *name);

/// Faults injected on `name` so far.
long outpost_fault_vfs_injected(const char *name);

/// Matching operations seen on `name` since it was last armed.
long outpost_fault_vfs_operations(const char *name);

#endif

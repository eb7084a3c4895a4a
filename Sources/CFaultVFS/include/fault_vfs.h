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
    OUTPOST_FAULT_POWER = 8,     /* a write or sync of a volatile file: the power goes (see below) */
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

/// Power loss. With volatile writes on, a database, WAL or journal file
/// opened from then on keeps what is written to it in memory (shared by every
/// connection to the path) until it is synced: only then does the real file
/// get those bytes. A power loss throws away everything not synced; every
/// handle opened before it fails from then on, and nothing opens or is
/// deleted until power_on (a dead machine does nothing). The real file then
/// holds exactly what a disk would hold after the loss.
void outpost_fault_vfs_set_volatile(const char *name, int on);
void outpost_fault_vfs_lose_power(const char *name);
void outpost_fault_vfs_power_on(const char *name);
int outpost_fault_vfs_is_powered_off(const char *name);
long outpost_fault_vfs_power_losses(const char *name);

/// The platform's own VFS these wrap (a copy written around the faults names it).
const char *outpost_fault_vfs_base_name(void);

#endif

#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation

/// Runs the whole process as batch work: every thread it has now, and so every thread they start later
/// (threads inherit the policy), under Linux's `SCHED_BATCH`. Such a thread gets the same share of the CPU as
/// before but never preempts another on wakeup; the scheduler switches between them on its tick instead.
///
/// Why a pull does this: it hands work between threads all the time (the network thread resumes a file's task;
/// the task queues a request; the writer's group commit resumes its files), and each wakeup let the woken
/// thread preempt the waker on its core. On two cores the network thread lost its core ~300 times per second to
/// a pool thread it had just woken (`perf record -e sched:sched_switch`), and a pull of 2,000 small files took
/// 1.07 s instead of 0.85 s, with 25 % more CPU (bench/README.md, #23). It also lets a music player or
/// `cloudsync serve` on the same machine, which are not batch work, run first when they wake.
///
/// Only for commands that are batch work by nature (`pull`); never for `serve`, whose threads answer players.
enum BatchScheduling {
    /// `SCHED_BATCH` of <linux/sched.h>, which Glibc's module does not export.
    static let policy: Int32 = 3

    /// Moves every thread of the process to `SCHED_BATCH`. Returns the number of threads that refused (a
    /// sandbox may forbid `sched_setscheduler`); the pull works the same, only without the gain.
    @discardableResult
    static func enter() -> Int {
        var refused = Set<Int32>()
        var moved = Set<Int32>()
        // A thread started while the list was read by a thread not moved yet kept the old policy: read again
        // until a pass finds nothing new.
        for _ in 0 ..< 4 {
            let tids = threads().filter { !moved.contains($0) && !refused.contains($0) }
            if tids.isEmpty { break }
            for tid in tids {
                var parameter = sched_param(sched_priority: 0)
                if sched_setscheduler(tid, policy, &parameter) == 0 || errno == ESRCH {
                    moved.insert(tid)  // ESRCH: the thread has ended meanwhile
                } else {
                    refused.insert(tid)
                }
            }
        }
        return refused.count
    }

    /// The thread ids of this process (`/proc/self/task`); without /proc (a bare chroot), the calling thread alone
    /// (0), whose later threads still inherit the policy.
    private static func threads() -> [Int32] {
        let listed = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).compactMap { Int32($0) }
        return listed.isEmpty ? [0] : listed
    }
}

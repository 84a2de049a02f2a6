#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Starts `body` on a new thread that the system knows by `name` (at most 15 bytes show in /proc, `top -H` and
/// `perf`), with `stackSize` bytes of stack when given. Named from inside, through `/proc/thread-self/comm`
/// (proc(5); Glibc's module does not export `pthread_setname_np`), not through Foundation: on Linux it gives the
/// OS thread a name set before `Thread.start()` only to `Thread.name`; `Thread.current.name` set from inside
/// left a pull's network thread with its creator's name ("oot.default-qos") in one CI run (why was not
/// reproduced); and a name over 15 bytes never reached the OS (`pthread_setname_np` refuses it).
public func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        nameCurrentThread(name)
        body()
    }
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
}

/// Gives the calling thread's OS name (the first 15 bytes of `name`); Foundation's `Thread.name` where /proc is
/// missing.
func nameCurrentThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else {
        Thread.current.name = name
        return
    }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}
